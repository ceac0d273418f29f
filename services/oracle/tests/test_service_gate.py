"""`service_held`, table-driven: samples with the load generator's ok ratio in, the gate out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    PrometheusTiming,
    find_manifest,
    grade,
    grading_complete,
    grading_config,
)

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
REPO_USE_CASES = Path(__file__).resolve().parents[3] / "use-cases"
NO_DATA = None


def config(**overrides: object) -> GradingConfig:
    """A 1 s probe, a clear at t=0 and a 5 s sustain: the window is t=0..5."""
    base: dict[str, object] = {
        "alert_to_clear": TARGET,
        "max_clear_time_seconds": 10.0,
        "sustained_clear_seconds": 5.0,
        "probe_interval_seconds": 1.0,
        "service_min_ok_ratio": 0.95,
    }
    return GradingConfig.model_validate(base | overrides)


def samples(ratios: Sequence[float | None]) -> list[GradingSample]:
    """One quiet, fully loaded sample per second with the given ok ratios."""
    return [
        GradingSample(
            at=DEPLOYED + timedelta(seconds=i),
            offset_seconds=float(i),
            target_state="inactive",
            sli=0.01,
            load_achieved_rps=20.0,
            load_target_rps=20.0,
            service_ok_ratio=ratio,
        )
        for i, ratio in enumerate(ratios)
    ]


def graded(ratios: Sequence[float | None], cfg: GradingConfig | None = None) -> MitigationGrade:
    return grade(cfg or config(), SHIPPED, (), samples(ratios))


def gate(result: MitigationGrade) -> tuple[bool, float, float, str] | None:
    """`service_held` as (satisfied, value, weight, detail), or `None` when not reported."""
    found = [s for s in result.score.signals if s.id == "service_held"]
    if not found:
        return None
    signal = found[0]
    return signal.satisfied, signal.value, signal.weight, signal.detail


def test_complete_answers_hold_the_gate_and_the_run_passes() -> None:
    """Every sample at ratio 1.0: the gate holds (weight 0, after load_held); the run passes."""
    result = graded([1.0] * 6)
    held = gate(result)
    assert held is not None
    assert held[:3] == (True, 1.0, 0.0)
    assert "at 6 samples from t=0.0s to t=5.0s (lowest 100%)" in held[3]
    assert [s.id for s in result.score.signals][-2:] == ["load_held", "service_held"]
    assert result.verdict == "passed"
    assert result.score.score == 1.0


@pytest.mark.parametrize(("ratio", "verdict"), [(0.95, "passed"), (0.9499, "failed")])
def test_the_minimum_is_inclusive(ratio: float, verdict: str) -> None:
    """A ratio exactly at the scenario's minimum holds; a shade below does not."""
    assert graded([1.0, 1.0, ratio, 1.0, 1.0, 1.0]).verdict == verdict


def test_sustained_degraded_answers_fail_the_run_and_say_why() -> None:
    """Fast but incomplete answers (ratio 0) from t=2: failed despite a perfect score,
    decided at the first short sample, and the detail names when, how much and the need."""
    ratios = [1.0, 1.0, 0.0, 0.02, 0.0, 0.0]
    assert grading_complete(config(), (), samples(ratios)[:2]) is None
    assert grading_complete(config(), (), samples(ratios)[:3]) == "verdict_decided"
    result = graded(ratios)
    failed = gate(result)
    assert failed is not None
    assert failed[:3] == (False, 0.0, 0.0)
    assert "service not held from t=2.0s to t=5.0s:" in failed[3]
    assert "only 0% to 2% of the load's checked answers were ok (need >= 95%)" in failed[3]
    assert "degraded" in failed[3]
    assert result.score.score == 1.0
    assert not result.score.passed
    assert result.verdict == "failed"


def test_a_share_just_under_the_minimum_does_not_read_as_the_minimum() -> None:
    """94.9 % ok against a 95 % minimum says 94.9 %, not "only 95 % (need >= 95 %)"; the
    detail names every way an answer falls short, wrong ones included."""
    failed = gate(graded([1.0, 1.0, 0.949, 0.949, 1.0, 1.0]))
    assert failed is not None
    assert "only 94.9% of the load's checked answers were ok (need >= 95%)" in failed[3]
    assert "wrong (a 2xx that disagrees with the truth)" in failed[3]


def test_a_dip_shorter_than_the_tolerance_is_allowed() -> None:
    """With a 1.5 s tolerance a 1 s dip passes; a dip lasting 2 s fails."""
    cfg = config(service_dip_tolerance_seconds=1.5)
    assert graded([1.0, 1.0, 0.5, 0.5, 1.0, 1.0], cfg).verdict == "passed"
    assert graded([1.0, 1.0, 0.5, 0.5, 0.5, 1.0], cfg).verdict == "failed"


def test_no_check_data_fails_closed_when_declared() -> None:
    """A declared gate without ratios (generator gone, nothing checked) fails closed."""
    result = graded([NO_DATA] * 6)
    failed = gate(result)
    assert failed is not None
    assert failed[0] is False
    assert "no answer-check data at 6 samples" in failed[3]
    assert result.verdict == "failed"


def test_samples_without_data_count_as_short_among_others() -> None:
    """A run mixing low and missing ratios reports both."""
    failed = gate(graded([1.0, 1.0, 0.1, NO_DATA, 1.0, 1.0]))
    assert failed is not None
    assert "t=2.0s to t=3.0s" in failed[3]
    assert "1 samples without check data" in failed[3]


def test_undeclared_gate_is_not_reported_and_does_not_gate() -> None:
    """A scenario without service_min_ok_ratio: no service_held signal, no data needed."""
    result = graded([NO_DATA] * 6, config(service_min_ok_ratio=None))
    assert gate(result) is None
    assert result.verdict == "passed"


def test_the_load_grace_period_applies() -> None:
    """Samples inside load_grace_seconds (the resume's scrape lag) do not count."""
    ratios = [NO_DATA, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert graded(ratios, config(load_grace_seconds=2.0)).verdict == "passed"
    assert graded(ratios, config(load_grace_seconds=1.0)).verdict == "failed"


def test_an_unobserved_stretch_fails_the_gate() -> None:
    """A hole longer than the gap limit in the graded stretch leaves the gate unsatisfied."""
    cfg = config(max_sample_gap_seconds=1.0)
    holed = [s for s in samples([1.0] * 6) if s.offset_seconds not in (2.0, 3.0)]
    result = grade(cfg, SHIPPED, (), holed)
    failed = gate(result)
    assert failed is not None
    assert "answers not observed from t=1.0s to t=4.0s" in failed[3]


@pytest.mark.parametrize("ratio", [0.0, -0.1, 1.01])
def test_the_minimum_must_be_a_share(ratio: float) -> None:
    """The declared minimum is in (0, 1]."""
    with pytest.raises(ValidationError, match="service_min_ok_ratio"):
        config(service_min_ok_ratio=ratio)


def test_the_stampede_scenario_declares_the_gate() -> None:
    """latency-cache-stampede's manifest declares 95 %, and the grading config carries it."""
    manifest = find_manifest(REPO_USE_CASES, "latency-cache-stampede")
    cfg = grading_config(manifest, 1.0, PrometheusTiming(5.0, 5.0), load_warmup_seconds=1.0)
    assert cfg.service_min_ok_ratio == 0.95
