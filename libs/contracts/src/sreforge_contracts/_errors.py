"""The one exception tree of the contracts package."""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["ContractError", "SandboxProbeFailed", "ScenarioNotFound"]

# Our field names are snake_case (or UPPER_CASE env keys); CamelCase parts are model names.
_MAX_PROBLEMS = 10
"""Problems listed in one message; the rest are counted (an error must stay a message)."""
_MEMBER_LABEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*")


class ContractError(ValueError):
    """Input did not match a contract; the message names the field or file at fault.

    `field` is the dotted path of the first offending field (`""` when the whole
    input is at fault, e.g. malformed JSON) and `source` the file or message kind.
    """

    def __init__(self, message: str, *, field: str = "", source: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.source = source

    @classmethod
    def from_validation(
        cls, error: ValidationError, source: str = "", *, skip_loc: int = 0
    ) -> ContractError:
        """Turn a pydantic error into one line per problem: `source: a.b: what went wrong`.

        `skip_loc` drops leading location parts (a discriminated union's tag).
        """
        details = error.errors(include_url=False)
        for detail in details:
            detail["loc"] = tuple(part for part in detail["loc"][skip_loc:] if _is_field(part))
        lines = list(dict.fromkeys(_describe(detail) for detail in details))
        if len(lines) > _MAX_PROBLEMS:  # a hostile input can have thousands: keep it readable
            lines = [*lines[:_MAX_PROBLEMS], f"and {len(lines) - _MAX_PROBLEMS} more problems"]
        prefix = f"{source}: " if source else ""
        first = _field_of(details[0]) if details else ""
        return cls(prefix + "; ".join(lines), field=first, source=source)


def _is_field(part: int | str) -> bool:
    """False for the union-member labels pydantic puts in a location (`AgentTranscript`)."""
    if isinstance(part, int):
        return True
    return "[" not in part and not _MEMBER_LABEL.fullmatch(part)


def _field_of(detail: ErrorDetails) -> str:
    if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
        return "type"
    return _dotted(detail)


def _dotted(detail: ErrorDetails) -> str:
    return ".".join(str(part) for part in detail["loc"])


def _describe(detail: ErrorDetails) -> str:
    kind = detail["type"]
    message = detail["msg"].removeprefix("Value error, ")
    if kind == "json_invalid":
        return f"malformed JSON: {detail.get('ctx', {}).get('error', message)}"
    if kind == "union_tag_invalid":
        ctx = detail.get("ctx", {})
        return f"type: unknown type {ctx.get('tag')!r}, expected one of {ctx.get('expected_tags')}"
    if kind == "union_tag_not_found":
        return "type: required field missing"
    if kind == "extra_forbidden":
        message = "unknown field"
    elif kind == "missing":
        message = "required field missing"
    elif "input" in detail:
        message = f"{message} (got {_short(detail['input'])})"
    where = _dotted(detail)
    return f"{where}: {message}" if where else message


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ScenarioNotFound(ContractError):
    """No scenario folder (or more than one) carries the id asked for under a use-cases root."""


class SandboxProbeFailed(ContractError):
    """The sandbox probe printed nothing parseable (it did not run, or was cut short)."""
