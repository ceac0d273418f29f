"""Request input checks for the books API."""

from __future__ import annotations

from typing import Any

STATUSES = ("want", "reading", "read")
_REQUIRED = ("isbn", "title", "author")


class InvalidInput(ValueError):
    """A request carried a value the API does not accept."""


def book_fields(payload: Any, *, partial: bool) -> dict[str, Any]:
    """Validated columns from a JSON body; `partial` allows any subset (PATCH)."""
    if not isinstance(payload, dict):
        raise InvalidInput("body must be a JSON object")
    unknown = set(payload) - {*_REQUIRED, "published_year", "pages", "status", "rating"}
    if unknown:
        raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
    if not partial:
        missing = [name for name in _REQUIRED if name not in payload]
        if missing:
            raise InvalidInput(f"missing field(s): {', '.join(missing)}")
    fields: dict[str, Any] = {}
    for name, value in payload.items():
        fields[name] = _CHECKS[name](name, value)
    if "title" in fields:
        fields["title_key"] = fields["title"].lower()
    if "author" in fields:
        fields["author_key"] = fields["author"].lower()
    return fields


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string")
    return value.strip()


def _isbn(name: str, value: Any) -> str:
    digits = _text(name, value).replace("-", "")
    if len(digits) != 13 or not digits.isdigit():
        raise InvalidInput(f"{name} must be 13 digits (ISBN-13), got {value!r}")
    return digits


def _int_in(low: int, high: int) -> Any:
    def check(name: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(f"{name} must be an integer from {low} to {high}")
        return value

    return check


def _status(name: str, value: Any) -> str:
    if value not in STATUSES:
        raise InvalidInput(f"{name} must be one of {', '.join(STATUSES)}")
    return str(value)


_CHECKS = {
    "isbn": _isbn,
    "title": _text,
    "author": _text,
    "published_year": _int_in(-3000, 2100),
    "pages": _int_in(1, 100_000),
    "rating": _int_in(1, 5),
    "status": _status,
}


def bounded_int(raw: str | None, name: str, default: int, low: int, high: int) -> int:
    """A query-string integer within [low, high]."""
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}, got {value}")
    return value
