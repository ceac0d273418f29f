"""Prometheus durations, as Prometheus itself reads them (`model.ParseDuration`).

The syntax: whole numbers with units, largest unit first, each unit at most once
(`1h30m`, `500ms`, `2d`, `1w`, `1y`), or a bare `0`. No fractions, no signs, no
spaces: `1.5s`, `30s1m` and `5s5s` are refused, as Prometheus refuses them in a config
file. A year is 365 days. The unit of a parsed duration is in the function's name.
"""

from __future__ import annotations

import re

__all__ = [
    "DURATION_PATTERN",
    "duration_ms",
    "duration_seconds",
    "format_duration",
    "scale_duration",
]

_UNITS_MS = {
    "y": 365 * 86_400_000,
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}

# `m(?!s)`: in `5ms` the `5m` must not be taken as minutes when the pattern is embedded
# in a larger one (a PromQL range or offset); the trailing guard stops `5m` matching `5mx`.
DURATION_PATTERN = (
    r"(?:0|(?=\d)(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m(?!s))?(?:\d+s)?(?:\d+ms)?)"
    r"(?![0-9A-Za-z_])"
)
"""A regular expression (no groups) matching one Prometheus duration, for embedding."""

_PARSE = re.compile("".join(rf"(?:(?P<{u}>\d+){u})?" for u in _UNITS_MS))


def duration_ms(text: str) -> int:
    """A Prometheus duration in whole milliseconds; `ValueError` names text it refuses."""
    if text == "0":
        return 0
    match = _PARSE.fullmatch(text) if text else None
    if match is None:
        raise ValueError(f"not a Prometheus duration: {text!r} (e.g. 1h30m, 500ms, 2d)")
    return sum(int(n) * _UNITS_MS[unit] for unit, n in match.groupdict().items() if n)


def duration_seconds(text: str) -> float:
    """A Prometheus duration in seconds (`duration_ms` / 1000)."""
    return duration_ms(text) / 1000


def format_duration(ms: int) -> str:
    """Milliseconds as the shortest exact one-unit Prometheus duration (`3s`, `1500ms`)."""
    if ms < 0:
        raise ValueError(f"a Prometheus duration cannot be negative: {ms} ms")
    for unit in ("h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0 and ms >= _UNITS_MS[unit]:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"


def scale_duration(text: str, time_scale: float) -> str:
    """`text` multiplied by `time_scale`, rounded to whole milliseconds (at least 1 ms)."""
    return format_duration(max(1, round(duration_ms(text) * time_scale)))
