"""Prometheus durations: one syntax and one semantics, the ones Prometheus itself has."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sreforge_prom import (
    DURATION_PATTERN,
    duration_ms,
    duration_seconds,
    format_duration,
    scale_duration,
)

ACCEPTED = [
    ("0", 0),
    ("500ms", 500),
    ("5s", 5_000),
    ("1m30s", 90_000),
    ("1h30m", 5_400_000),
    ("2d", 172_800_000),
    ("1w", 604_800_000),
    ("1y", 31_536_000_000),
    ("1y2w3d4h5m6s7ms", 33_019_506_007),
    ("90s", 90_000),
]
# Each was read by one of the two parsers this package replaced: `1.5s` and ` 5s ` by the
# oracle's (as seconds), `30s1m` and `5s5s` by both, neither of which took a bare `0`.
REFUSED = ["", "5", "1.5s", " 5s ", "30s1m", "5s5s", "-5s", "5 seconds", "1h30", "5S", "0s0"]


@pytest.mark.parametrize(("text", "ms"), ACCEPTED)
def test_duration_ms_reads_prometheus_syntax(text: str, ms: int) -> None:
    """Whole numbers, largest unit first; a year is 365 days."""
    assert duration_ms(text) == ms
    assert duration_seconds(text) == pytest.approx(ms / 1000)


@pytest.mark.parametrize("text", REFUSED)
def test_duration_ms_refuses_what_prometheus_refuses_and_names_it(text: str) -> None:
    """No fractions, spaces, repeats or out-of-order units: the error quotes the text."""
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        duration_ms(text)


@pytest.mark.parametrize(
    ("text", "accepted"), [(t, True) for t, _ in ACCEPTED] + [(t, False) for t in REFUSED if t]
)
def test_the_real_prometheus_agrees(tmp_path: Path, text: str, accepted: bool) -> None:
    """`promtool check rules` takes exactly the `for:` durations the parser takes."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing (apt install prometheus)")
    rules = tmp_path / "rules.yml"
    rules.write_text(
        f'groups:\n- name: g\n  rules:\n  - alert: A\n    expr: vector(1)\n    for: "{text}"\n'
    )
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=30
    )
    assert (checked.returncode == 0) is accepted, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("ms", "text"),
    [(3_000, "3s"), (1_500, "1500ms"), (90_000, "90s"), (7_200_000, "2h"), (0, "0ms")],
)
def test_format_duration_writes_the_shortest_exact_single_unit(ms: int, text: str) -> None:
    """What it writes reads back to the same milliseconds."""
    assert format_duration(ms) == text
    assert duration_ms(text) == ms


def test_format_duration_refuses_a_negative() -> None:
    """Prometheus has no negative durations."""
    with pytest.raises(ValueError, match="negative"):
        format_duration(-1)


@pytest.mark.parametrize(
    ("real", "scale", "scaled"),
    [("30s", 0.1, "3s"), ("5s", 0.1, "500ms"), ("1m30s", 0.05, "4500ms"), ("1ms", 0.01, "1ms")],
)
def test_scale_duration_rounds_to_whole_milliseconds_at_least_one(
    real: str, scale: float, scaled: str
) -> None:
    """A run's time scale shrinks a duration without ever reaching zero."""
    assert scale_duration(real, scale) == scaled


def test_duration_pattern_finds_durations_inside_promql() -> None:
    """`5ms` is not five minutes and an `s`; a duration glued to a word is none."""
    found = re.findall(rf"\[({DURATION_PATTERN})\]", "a[5ms] b[1m30s] c[30s1m] d[5mx]")
    assert found == ["5ms", "1m30s"]
    assert re.findall(rf"offset ({DURATION_PATTERN})", "x offset 5ms y offset 1h") == ["5ms", "1h"]
