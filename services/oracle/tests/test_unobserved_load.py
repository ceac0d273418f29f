"""A load generator the harness could not read is not a load that died.

On a starved host the generator's `/metrics` can miss the probe's timeout while its port
is open (`load_unobserved`). Such samples are neither short nor held: a stretch of them
leaves `load_held` blind, and a run that everything observed would pass ends `error`
(`GradingError`), never `failed`; a run that fails on what was observed still fails.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingError,
    GradingSample,
    grade,
    grading_complete,
)

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)


def config(**overrides: object) -> GradingConfig:
    base: dict[str, object] = {
        "alert_to_clear": TARGET,
        "max_clear_time_seconds": 10.0,
        "sustained_clear_seconds": 5.0,
        "probe_interval_seconds": 1.0,
        "load_dip_tolerance_seconds": 1.0,
        "service_min_ok_ratio": 0.95,
        "service_dip_tolerance_seconds": 1.0,
    }
    return GradingConfig.model_validate(base | overrides)


def series(states: str, reads: str) -> list[GradingSample]:
    """One sample a second: `states` F firing / I inactive; `reads` per sample: `.` the load
    read and held, `u` unobserved (no answer in time), `d` died (no data), `t` throttled."""
    out = []
    for i, (state, read) in enumerate(zip(states, reads, strict=True)):
        load: dict[str, object] = {
            ".": {"load_achieved_rps": 20.0, "load_target_rps": 20.0, "service_ok_ratio": 1.0},
            "u": {"load_unobserved": True},
            "d": {},
            "t": {"load_achieved_rps": 0.0, "load_target_rps": 20.0, "service_ok_ratio": 1.0},
        }[read]
        out.append(
            GradingSample.model_validate(
                {
                    "at": DEPLOYED + timedelta(seconds=i),
                    "offset_seconds": float(i),
                    "target_state": "firing" if state == "F" else "inactive",
                    "sli": 0.1,
                    **load,
                }
            )
        )
    return out


def signal(samples: list[GradingSample], signal_id: str) -> tuple[bool, str]:
    result = grade(config(), SHIPPED, (), samples)
    found = next(s for s in result.score.signals if s.id == signal_id)
    return found.satisfied, found.detail


def test_a_lasting_unobserved_stretch_ends_a_passing_run_in_error_not_failed() -> None:
    """Everything observed passes; the generator unread for 3 s is the harness's blind spot."""
    samples = series("FIIIIIIII", "...uuu...")
    assert grading_complete(config(), (), samples[:5]) is None, "a blind spot is not decided"
    with pytest.raises(GradingError, match="could not observe the load") as raised:
        grade(config(), SHIPPED, (), samples)
    assert "from t=3.0s to t=5.0s" in str(raised.value)
    assert "no evidence that it died" in str(raised.value)


def test_one_unobserved_sample_within_the_tolerance_still_passes() -> None:
    """A single slow scrape is retried within the sample and, if still unread, tolerated."""
    samples = series("FIIIIIIII", "....u....")
    result = grade(config(), SHIPPED, (), samples)
    assert result.verdict == "passed"
    held, detail = signal(samples, "load_held")
    assert held
    assert "1 samples unread" in detail
    assert signal(samples, "service_held")[0], "an unread sample is no short answer check"


def test_a_run_that_fails_on_what_was_observed_still_fails() -> None:
    """The alert never clears: the unread stretch does not turn that into an error."""
    result = grade(config(), SHIPPED, (), series("FFFFFFFFFFF", "...uuu....."))
    assert result.verdict == "failed"
    assert not result.score.passed


@pytest.mark.parametrize(
    ("reads", "cause"),
    [("...ddd...", "the load died"), ("...uudd..", "the load died"),
     ("...ttt...", "the load was throttled")],
    ids=["died", "unread-then-died", "paused"],
)  # fmt: skip
def test_a_load_that_died_or_was_paused_still_fails_load_held(reads: str, cause: str) -> None:
    """A refused port (the generator killed) and a paused generator are observed facts:
    `failed`, never `error`, whatever went unread around them."""
    samples = series("FIIIIIIII", reads)
    result = grade(config(), SHIPPED, (), samples)
    assert result.verdict == "failed"
    held, detail = signal(samples, "load_held")
    assert not held
    assert cause in detail


def test_a_blind_gate_is_not_settled_so_grading_goes_on() -> None:
    """Unread samples never stop grading early: later samples may still show the load."""
    samples = series("FIIIIIIII", ".uuuuuuuu")
    assert grading_complete(config(), (), samples[:6]) is None
    with pytest.raises(GradingError, match="the harness could not observe the load"):
        grade(config(), SHIPPED, (), samples)
