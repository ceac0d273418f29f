"""The stated message limits: checked before parsing, named in the error, never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from sreforge_contracts import (
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    ContractError,
    check_message,
    parse_event,
    parse_run_start,
)


def _nested(depth: int) -> bytes:
    return b'{"scenario": "s", "agent": "noop", "labels": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("parse", [parse_run_start, parse_event])
def test_an_oversize_message_is_refused_naming_the_limit(parse: Callable[[bytes], object]) -> None:
    """Over MAX_MESSAGE_BYTES: a ContractError that says the size and the limit."""
    body = json.dumps({"scenario": "s", "agent": "noop", "pad": "x" * MAX_MESSAGE_BYTES})
    with pytest.raises(ContractError, match=f"over the limit of {MAX_MESSAGE_BYTES} bytes"):
        parse(body.encode())


@pytest.mark.parametrize("parse", [parse_run_start, parse_event])
def test_deep_nesting_is_refused_naming_the_limit_not_a_recursion_error(
    parse: Callable[[bytes], object],
) -> None:
    """100 000 levels of `[` used to reach json.loads and raise RecursionError."""
    with pytest.raises(ContractError, match=f"over the limit of {MAX_JSON_DEPTH}"):
        parse(_nested(100_000))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    """Depth is structure, not text: a label full of brackets (and escaped quotes) is fine."""
    text = '[[[\\"{{{' * MAX_JSON_DEPTH
    body = json.dumps({"scenario": "s", "agent": "noop", "labels": {"note": text}})
    check_message(body, "run.start")
    assert parse_run_start(body).labels["note"] == text


def test_nesting_at_the_limit_passes_the_check() -> None:
    """Exactly MAX_JSON_DEPTH levels are allowed; one more is not."""
    check_message(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, "event")
    deeper = MAX_JSON_DEPTH + 1
    with pytest.raises(ContractError, match=f"nests {deeper} levels"):
        check_message(b"[" * deeper + b"]" * deeper, "event")
