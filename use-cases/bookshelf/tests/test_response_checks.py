"""loadgen's response checks, pure: what counts as ok, degraded or failed, and the ok window."""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from .conftest import STACK

DUNE: dict[str, object] = {"isbn": "9780591541281", "title": "Dune"}
MESSIAH: dict[str, object] = {"isbn": "9780156834117", "title": "Dune Messiah"}


@pytest.fixture(scope="module")
def loadgen() -> Iterator[ModuleType]:
    """`loadgen` imported from the stack (it is not an installed package)."""
    path = str(STACK / "loadgen")
    sys.path.insert(0, path)
    try:
        yield importlib.import_module("loadgen")
    finally:
        sys.path.remove(path)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def search_body(*hits: dict[str, object]) -> bytes:
    return json.dumps({"query": "dune", "count": len(hits), "results": list(hits)}).encode()


def enriched(book: dict[str, object]) -> dict[str, object]:
    return {**book, "metadata": {"isbn": book["isbn"], "title": book["title"], "pages": 412}}


@pytest.mark.parametrize(
    ("status", "body", "result"),
    [
        (200, search_body(enriched(DUNE), enriched(MESSIAH)), "ok"),
        (200, search_body(enriched(DUNE), {**MESSIAH, "metadata": None}), "degraded"),
        (200, search_body({**DUNE, "metadata": None}), "degraded"),
        (200, search_body({**DUNE, "metadata": {}}), "degraded"),
        (200, search_body({**DUNE, "metadata": enriched(MESSIAH)["metadata"]}), "degraded"),
        (200, search_body(DUNE), "degraded"),
        (200, search_body(), "degraded"),
        (200, b"<html>busy</html>", "degraded"),
        (200, b'["not", "a", "search"]', "degraded"),
        (500, search_body(enriched(DUNE)), "failed"),
        (404, b"{}", "failed"),
        (None, b"", "failed"),
    ],
    ids=[
        "all-enriched",
        "one-hit-null",
        "only-hit-null",
        "empty-metadata",
        "other-editions-metadata",
        "no-metadata-key",
        "no-hits",
        "not-json",
        "not-an-object",
        "5xx",
        "4xx",
        "timeout-or-transport-error",
    ],
)
def test_search_storm_answers_are_judged_by_their_hits(
    loadgen: ModuleType, status: int | None, body: bytes, result: str
) -> None:
    """A search is ok only as a 2xx whose hits all carry their own edition's metadata; a 2xx
    short of that (a null, an empty or a foreign record, no hits, no JSON) is degraded."""
    checks = loadgen.ResponseChecks(CollectorRegistry(), "search-storm", 10)
    assert checks.judge(status, body) == result


def test_profiles_without_a_content_check_count_any_2xx_as_ok(loadgen: ModuleType) -> None:
    """listing-mix has no body check: 2xx is ok, anything else failed, never degraded."""
    checks = loadgen.ResponseChecks(CollectorRegistry(), "listing-mix", 10)
    assert checks.judge(200, b"<anything>") == "ok"
    assert checks.judge(503, b"") == "failed"
    assert checks.judge(None, b"") == "failed"


def test_ok_ratio_is_the_share_of_ok_answers_over_the_window(loadgen: ModuleType) -> None:
    """ok / checked over the last window seconds; older answers age out; empty reads NaN."""
    clock = Clock()
    window = loadgen.OkWindow(10, clock=clock)
    assert math.isnan(window.ratio())
    for result in ["degraded"] * 5:
        window.record(result)
    clock.now += 6
    for result in ["ok"] * 14 + ["failed"]:
        window.record(result)
    assert window.ratio() == pytest.approx(14 / 20)
    clock.now += 5  # the five degraded answers are now 11 s old
    assert window.ratio() == pytest.approx(14 / 15)
    window.clear()
    assert math.isnan(window.ratio())


def test_metrics_count_every_answer_but_window_only_the_current_period(
    loadgen: ModuleType,
) -> None:
    """`loadgen_responses_checked_total{result}` starts at 0 for each result and counts every
    answer; `loadgen_ok_ratio` leaves out answers from before the last pause."""
    registry = CollectorRegistry()
    checks = loadgen.ResponseChecks(registry, "search-storm", 10, clock=Clock())
    text = generate_latest(registry).decode()
    for result in ("ok", "degraded", "failed"):
        assert f'loadgen_responses_checked_total{{result="{result}"}} 0.0' in text
    assert "loadgen_ok_ratio NaN" in text
    checks.record("ok")
    checks.record("degraded")
    checks.record("failed", current=False)
    assert registry.get_sample_value("loadgen_ok_ratio") == 0.5
    assert registry.get_sample_value("loadgen_responses_checked_total", {"result": "failed"}) == 1
