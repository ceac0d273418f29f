"""The mitigation algorithm, table-driven: a sample series in, the expected signals out."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from sreforge_contracts import AlertState
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingError,
    GradingSample,
    MitigationGrade,
    ObservedAlert,
    grade,
    grading_complete,
)

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
STATES: dict[str, AlertState] = {"F": "firing", "P": "pending", "I": "inactive"}


def config(**overrides: object) -> GradingConfig:
    base: dict[str, object] = {
        "alert_to_clear": TARGET,
        "max_clear_time_seconds": 10.0,
        "sustained_clear_seconds": 5.0,
        "probe_interval_seconds": 1.0,
        "scope": frozenset({"api"}),
    }
    return GradingConfig.model_validate(base | overrides)


def alert(name: str, state: str = "firing", **labels: str) -> ObservedAlert:
    return ObservedAlert.model_validate({"name": name, "state": state, "labels": labels})


@dataclass
class Series:
    """A sample per character of `states` (F firing, P pending, I inactive), one per `step`."""

    states: str
    step: float = 1.0
    alerts: dict[int, list[ObservedAlert]] = field(default_factory=dict)
    load: dict[int, tuple[float | None, float | None, float | None]] = field(default_factory=dict)

    def samples(self) -> list[GradingSample]:
        out = []
        for i, char in enumerate(self.states):
            offset = i * self.step
            target = [alert(TARGET, STATES[char].replace("inactive", "pending"), service="api")]
            achieved, wanted, sli = self.load.get(i, (20.0, 20.0, 0.1))
            out.append(
                GradingSample(
                    at=DEPLOYED + timedelta(seconds=offset),
                    offset_seconds=offset,
                    target_state=STATES[char],
                    alerts=tuple((target if char != "I" else []) + self.alerts.get(i, [])),
                    sli=sli,
                    load_achieved_rps=achieved,
                    load_target_rps=wanted,
                )
            )
        return out


def graded(
    series: Series,
    cfg: GradingConfig | None = None,
    handoff: Sequence[ObservedAlert] = (),
    outcome: DeliveryOutcome = SHIPPED,
) -> MitigationGrade:
    return grade(cfg or config(), outcome, handoff, series.samples())


def signals(result: MitigationGrade) -> dict[str, tuple[bool, float]]:
    return {s.id: (s.satisfied, round(s.value, 6)) for s in result.score.signals}


def detail(result: MitigationGrade, signal_id: str) -> str:
    return next(s.detail for s in result.score.signals if s.id == signal_id)


# --- fail-closed rules ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "verdict", "signal_id"),
    [
        (
            DeliveryOutcome(submitted=False, ci_green=False, redeployed=False),
            "failed",
            "no_submission",
        ),
        (DeliveryOutcome(submitted=True, ci_green=False, redeployed=False), "rejected", "ci_green"),
        (DeliveryOutcome(submitted=True, ci_green=True, redeployed=False), "failed", "deployed"),
    ],
    ids=["no-submission", "ci-red", "redeploy-failed"],
)
def test_fail_closed_rules_score_zero_with_the_deciding_signal(
    outcome: DeliveryOutcome, verdict: str, signal_id: str
) -> None:
    """No submission, red CI and a failed redeploy each score 0 without grading, named right."""
    result = graded(Series("I" * 10), outcome=outcome)
    assert result.verdict == verdict
    assert result.score.score == 0.0
    assert not result.score.passed
    assert [s.id for s in result.score.signals] == [signal_id]
    assert result.sli_series == []
    assert result.stop_reason is None


def test_failed_redeploy_is_never_labelled_as_ci() -> None:
    """A deploy failure must read as a deploy failure, with its reason, not as red CI."""
    outcome = DeliveryOutcome(submitted=True, ci_green=True, redeployed=False, reason="port busy")
    (signal,) = graded(Series("I"), outcome=outcome).score.signals
    assert signal.id == "deployed"
    assert "redeploy failed" in signal.detail
    assert "port busy" in signal.detail
    assert "CI was red" not in signal.detail


# --- the alert signals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "expected", "score", "verdict"),
    [
        (
            "FIIIIII",
            {
                "alert_cleared": (True, 1.0),
                "sustained_clear": (True, 1.0),
                "time_to_clear": (True, 0.9),
            },
            0.99,
            "passed",
        ),
        (
            "IIIIII",
            {
                "alert_cleared": (True, 1.0),
                "sustained_clear": (True, 1.0),
                "time_to_clear": (True, 1.0),
            },
            1.0,
            "passed",
        ),
        (
            "FFFFFFFFIIIIII",
            {
                "alert_cleared": (True, 1.0),
                "sustained_clear": (True, 1.0),
                "time_to_clear": (True, 0.2),
            },
            0.92,
            "passed",
        ),
        (
            "FFFFFFFFFFF",
            {
                "alert_cleared": (False, 0.0),
                "sustained_clear": (False, 0.0),
                "time_to_clear": (False, 0.0),
            },
            0.35,
            "failed",
        ),
        (
            "FIIFIIIII",
            {
                "alert_cleared": (True, 1.0),
                "sustained_clear": (False, 0.0),
                "time_to_clear": (True, 0.9),
            },
            0.79,
            "failed",
        ),
    ],
    ids=["clears-fast", "already-clear", "clears-late", "never-clears", "clears-then-refires"],
)
def test_alert_signals_follow_the_target_alert(
    states: str, expected: dict[str, tuple[bool, float]], score: float, verdict: str
) -> None:
    """alert_cleared, time_to_clear = 1 - t/max and sustained_clear, and their weighted score."""
    result = graded(Series(states))
    assert {k: signals(result)[k] for k in expected} == expected
    assert result.score.score == pytest.approx(score)
    assert result.verdict == verdict
    assert signals(result)["ci_green"] == (True, 1.0)


def test_clear_then_one_firing_sample_fails_sustained_and_the_run() -> None:
    """One firing sample after the clear fails sustained_clear; the score stays <= 0.80."""
    result = graded(Series("FIIIFIIIIIII"))
    assert signals(result)["sustained_clear"] == (False, 0.0)
    assert "fired again at t=4.0s, 3.0s after clearing at t=1.0s" in detail(
        result, "sustained_clear"
    )
    assert result.score.score <= 0.80
    assert result.verdict == "failed"


def test_pending_samples_count_as_clear_and_are_reported() -> None:
    """Pending is not firing, so it clears; the detail counts pending samples after the clear."""
    result = graded(Series("FPPIIII"))
    assert result.verdict == "passed"
    assert "pending" in detail(result, "alert_cleared")
    assert "2 pending" in detail(result, "sustained_clear")


def test_a_gap_in_the_sustained_window_fails_closed() -> None:
    """A stretch longer than the gap limit without samples is not 'stayed clear'."""
    samples = [s for s in Series("FIIIIIII").samples() if s.offset_seconds not in (2.0, 3.0, 4.0)]
    result = grade(config(), SHIPPED, (), samples)
    assert signals(result)["sustained_clear"] == (False, 0.0)
    assert "not observed from t=1.0s to t=5.0s" in detail(result, "sustained_clear")
    assert result.verdict == "failed"


def test_a_window_that_ends_early_cannot_be_graded() -> None:
    """Too few samples (window not covered, verdict still open) raises instead of passing."""
    with pytest.raises(GradingError, match=r"samples end at t=3\.0s, the window runs to t=6\.0s"):
        graded(Series("FIII"))


# --- no_new_alerts ------------------------------------------------------------------------


NEW = alert("DbPoolSaturated", service="api")


@pytest.mark.parametrize(
    ("extra", "handoff", "satisfied"),
    [
        ({4: [NEW]}, [], False),
        ({4: [NEW]}, [alert("DbPoolSaturated", service="api", instance="127.0.0.1:9")], True),
        ({4: [alert("Noise", service="api", role="ambient")]}, [], True),
        ({4: [alert("WorkerDown", service="billing")]}, [], True),
        ({4: [alert("NoServiceLabel")]}, [], True),
        ({4: [alert("DbPoolSaturated", "pending", service="api")]}, [], True),
        ({4: [alert(TARGET, service="other")]}, [], True),
    ],
    ids=[
        "new-in-scope",
        "firing-at-handoff",
        "ambient",
        "out-of-scope",
        "no-service-label",
        "only-pending",
        "the-target-itself",
    ],
)
def test_no_new_alerts_counts_only_new_in_scope_firing_alerts(
    extra: dict[int, list[ObservedAlert]], handoff: list[ObservedAlert], satisfied: bool
) -> None:
    """Only an in-scope, non-ambient alert not firing at hand-off, firing at a sample, counts."""
    result = graded(Series("FIIIIII", alerts=extra), handoff=handoff)
    assert signals(result)["no_new_alerts"] == (satisfied, float(satisfied))


def test_no_new_alerts_is_sampled_not_an_end_snapshot() -> None:
    """An alert that fires mid-window and resolves before the end still counts, with its time."""
    result = graded(Series("FIIIIII", alerts={3: [NEW]}))
    assert signals(result)["no_new_alerts"] == (False, 0.0)
    assert "DbPoolSaturated (service=api) first at t=3.0s" in detail(result, "no_new_alerts")
    assert result.score.score == pytest.approx(0.89)


def test_without_a_scope_every_service_counts() -> None:
    """`scope=None` puts every service in scope, unlabelled alerts included."""
    result = graded(Series("FIIIIII", alerts={2: [alert("NoServiceLabel")]}), config(scope=None))
    assert signals(result)["no_new_alerts"] == (False, 0.0)


# --- load_held ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("load", "cause"),
    [
        ((None, None, None), "the load died"),
        ((5.0, 20.0, 0.1), "the load was throttled"),
        ((0.0, 20.0, None), "the app stopped answering"),
        ((0.0, 0.0, None), "the load was throttled"),
    ],
    ids=["died", "throttled", "app-down", "target-zero"],
)
def test_load_not_held_means_not_passed_and_says_why(
    load: tuple[float | None, float | None, float | None], cause: str
) -> None:
    """Grading without load proves nothing: the run fails and the detail names the cause."""
    series = Series("FIIIIIIII", load={i: load for i in range(3, 9)})
    samples = series.samples()
    assert grading_complete(config(), (), samples[:3]) is None
    assert grading_complete(config(), (), samples[:4]) == "verdict_decided"
    result = grade(config(), SHIPPED, (), samples[:4])
    assert signals(result)["load_held"] == (False, 0.0)
    assert cause in detail(result, "load_held")
    assert "from t=3.0s" in detail(result, "load_held")
    assert not result.score.passed
    assert result.verdict == "failed"


def test_load_exactly_at_the_ratio_holds() -> None:
    """Achieved at exactly 90 % of target is held; a shade below is not."""
    held = graded(Series("FIIIIII", load={i: (18.0, 20.0, 0.1) for i in range(7)}))
    assert signals(held)["load_held"] == (True, 1.0)
    short = graded(Series("FIIIIII", load={2: (17.9, 20.0, 0.1)}))
    assert signals(short)["load_held"] == (False, 0.0)
    assert short.verdict == "failed"


def test_load_grace_period_ignores_the_resume_ramp() -> None:
    """Samples inside load_grace_seconds (scrape lag after resume) do not count."""
    series = Series("FIIIIII", load={0: (None, None, None), 1: (3.0, 20.0, 0.1)})
    assert graded(series, config(load_grace_seconds=2.0)).verdict == "passed"
    assert graded(series, config(load_grace_seconds=1.0)).verdict == "failed"


def test_load_dip_tolerance_allows_short_dips_only() -> None:
    """A dip shorter than the tolerance is allowed; one lasting it fails load_held."""
    cfg = config(load_dip_tolerance_seconds=1.5)
    brief = Series("FIIIIII", load={3: (1.0, 20.0, 0.1)})
    assert graded(brief, cfg).verdict == "passed"
    long = Series("FIIIIIII", load={3: (1.0, 20.0, 0.1), 4: (1.0, 20.0, 0.1), 5: (1.0, 20.0, 0.1)})
    assert graded(long, cfg).verdict == "failed"


# --- weights, threshold, early stop --------------------------------------------------------


def test_weights_from_the_config_are_honoured() -> None:
    """The manifest's weights replace the defaults in the score and in each signal."""
    weights = {
        "ci_green": 0.1,
        "alert_cleared": 0.1,
        "sustained_clear": 0.1,
        "time_to_clear": 0.6,
        "no_new_alerts": 0.1,
    }
    result = graded(Series("FFFFFIIIIII"), config(weights=weights))
    assert result.score.score == pytest.approx(0.1 + 0.1 + 0.1 + 0.6 * 0.5 + 0.1)
    assert {s.id: s.weight for s in result.score.signals} == weights | {"load_held": 0.0}


@pytest.mark.parametrize(("threshold", "passed"), [(0.95, True), (0.950001, False)])
def test_pass_threshold_boundary(threshold: float, passed: bool) -> None:
    """A score exactly at the threshold passes (the float sum is rounded first)."""
    result = graded(Series("FFFFFIIIIII"), config(pass_threshold=threshold))
    assert result.score.score == 0.95
    assert result.score.passed is passed


def test_grading_stops_at_the_window_end_not_before() -> None:
    """A clean run is sampled through first clear + sustained window, then stops."""
    samples = Series("FIIIIII").samples()
    assert [grading_complete(config(), (), samples[:n]) for n in (1, 2, 6, 7)] == [
        None,
        None,
        None,
        "window_complete",
    ]


def test_never_cleared_stops_at_max_clear() -> None:
    """Without a clear, grading ends at max_clear_time_seconds."""
    samples = Series("F" * 12).samples()
    assert grading_complete(config(), (), samples[:10]) is None
    assert grading_complete(config(), (), samples[:11]) == "window_complete"


def test_refire_stops_early_only_when_it_decides_the_verdict() -> None:
    """A firing sample after the clear stops grading when no later sample could make it pass."""
    samples = Series("FIIFIIIII").samples()
    assert grading_complete(config(), (), samples[:4]) == "verdict_decided"
    light = {
        "ci_green": 0.4,
        "alert_cleared": 0.4,
        "sustained_clear": 0.05,
        "time_to_clear": 0.1,
        "no_new_alerts": 0.05,
    }
    assert grading_complete(config(weights=light), (), samples[:4]) is None
    result = grade(config(weights=light), SHIPPED, (), samples[:7])
    assert result.stop_reason == "window_complete"
    assert result.verdict == "passed"


def test_sli_series_keeps_every_sample() -> None:
    """Every sample's SLI, alert state, firing alerts and load go into sli_series."""
    result = graded(Series("FPIIIII", alerts={2: [NEW]}))
    assert [s.alert_state for s in result.sli_series] == [
        "firing",
        "pending",
        "inactive",
        "inactive",
        "inactive",
        "inactive",
        "inactive",
    ]
    assert result.sli_series[0].firing_alerts == [TARGET]
    assert result.sli_series[2].firing_alerts == ["DbPoolSaturated"]
    assert result.sli_series[3].load_achieved_rps == 20.0


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"weights": {"ci_green": 1.0}}, "weights"),
        (
            {
                "weights": {
                    "ci_green": -1.0,
                    "alert_cleared": 1,
                    "sustained_clear": 1,
                    "time_to_clear": 0,
                    "no_new_alerts": 0,
                }
            },
            "weights",
        ),
        ({"max_sample_gap_seconds": 0.5}, "max_sample_gap_seconds"),
        ({"sustained_clear_seconds": 0}, "sustained_clear_seconds"),
    ],
    ids=["missing-weights", "negative-weight", "gap-below-interval", "zero-window"],
)
def test_bad_config_is_refused_naming_the_field(overrides: dict[str, object], field: str) -> None:
    """A misconfigured grading is refused before any run is graded with it."""
    with pytest.raises(ValidationError, match=field):
        config(**overrides)


@pytest.mark.parametrize("weights", [None, "light-sustain"])
def test_an_early_stop_never_changes_the_verdict(weights: str | None) -> None:
    """Over many random runs: whenever grading stops early, the full window would not pass either.

    And once the window is complete, later samples change nothing.
    """
    rng = random.Random(7)
    light = {
        "ci_green": 0.4,
        "alert_cleared": 0.4,
        "sustained_clear": 0.05,
        "time_to_clear": 0.1,
        "no_new_alerts": 0.05,
    }
    cfg = config(weights=light) if weights else config()
    early = 0
    for _ in range(400):
        states = "".join(rng.choice("FFPI") for _ in range(20))
        extra = {rng.randrange(20): [NEW]} if rng.random() < 0.2 else {}
        load = {rng.randrange(20): (1.0, 20.0, 0.1)} if rng.random() < 0.2 else {}
        samples = Series(states, alerts=extra, load=load).samples()
        full = grade(cfg, SHIPPED, (), samples)
        for n in range(1, len(samples) + 1):
            stop = grading_complete(cfg, (), samples[:n])
            if stop is None:
                continue
            stopped = grade(cfg, SHIPPED, (), samples[:n])
            if stop == "verdict_decided":
                early += 1
                assert not full.score.passed, (states, extra, load, n)
                assert stopped.verdict == "failed"
            else:
                assert stopped.score == full.score, (states, n)
            break
    assert early > 0


def test_a_clear_before_the_settle_time_does_not_count() -> None:
    """A drained deploy lets the alert resolve, then the resumed load fires it again: the
    early not-firing samples are no clear once the config says when a clear counts, so
    the known-bad fix fails alert_cleared instead of scoring it."""
    drained_then_refired = Series("III" + "F" * 9)
    naive = graded(drained_then_refired)
    assert signals(naive)["alert_cleared"][0]  # what a t=0 clear used to earn
    settled = graded(drained_then_refired, config(clear_settle_seconds=3.0))
    assert not signals(settled)["alert_cleared"][0]
    assert "from t=3.0s" in detail(settled, "alert_cleared")
    assert settled.verdict == "failed"
    assert not signals(settled)["time_to_clear"][0]


def test_a_real_fix_clears_at_the_settle_time() -> None:
    """A fix that stays clear is credited from the settle time on, with its time to clear."""
    result = graded(Series("I" * 12), config(clear_settle_seconds=3.0, sustained_clear_seconds=5))
    assert signals(result)["alert_cleared"] == (True, 1.0)
    assert "t=3.0s" in detail(result, "alert_cleared")
    assert signals(result)["time_to_clear"] == (True, pytest.approx(0.7))
    assert result.verdict == "passed"


def test_the_settle_time_must_leave_room_to_clear() -> None:
    """A settle time at or past max_clear_time_seconds could never credit a clear."""
    with pytest.raises(ValidationError, match="clear_settle_seconds"):
        config(clear_settle_seconds=10.0)
