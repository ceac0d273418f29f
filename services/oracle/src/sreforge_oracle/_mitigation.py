"""The mitigation oracle (SPEC §7), pure: config, outcome and samples in; score and verdict out.

Nothing here reads a clock or the network: the grading loop passes the
samples it took, with their offsets since `Deployed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sreforge_contracts import OracleScore, OracleSignal

from sreforge_oracle._client_sli import assess_client_sli
from sreforge_oracle._errors import GradingError
from sreforge_oracle._load import assess_load
from sreforge_oracle._model import (
    WEIGHTED_SIGNALS,
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    ObservedAlert,
    StopReason,
)
from sreforge_oracle._monitoring import assess_monitoring
from sreforge_oracle._service import assess_service
from sreforge_oracle._telemetry import assess_telemetry
from sreforge_oracle._window import Finding, Window, first_gap, window_of

__all__ = ["grade", "grading_complete"]

_SCORE_DIGITS = 6  # so that weights like .25+.35+.20+.05 meet a .85 threshold exactly


@dataclass(frozen=True)
class _Assessment:
    window: Window
    weighted: dict[str, Finding]
    gates: tuple[Finding, ...]
    """`load_held`, then each declared one of `service_held`, `client_sli_held`,
    `telemetry_intact` and `monitoring_intact` (weight 0 each)."""

    def score(self, config: GradingConfig) -> float:
        return _weighted_mean(config, {k: f.signal.value for k, f in self.weighted.items()})

    def can_still_pass(self, config: GradingConfig) -> bool:
        best = _weighted_mean(config, {k: f.best_value for k, f in self.weighted.items()})
        return best >= config.pass_threshold and all(g.best_value >= 1.0 for g in self.gates)

    def gates_held(self) -> bool:
        return all(gate.signal.satisfied for gate in self.gates)

    def blind_gates(self) -> list[Finding]:
        """The unsatisfied gates, if every one of them is only blind; else `[]`."""
        failing = [gate for gate in self.gates if not gate.signal.satisfied]
        return failing if failing and all(gate.blind for gate in failing) else []


def grade(
    config: GradingConfig,
    outcome: DeliveryOutcome,
    handoff_alerts: Iterable[ObservedAlert],
    samples: Sequence[GradingSample],
) -> MitigationGrade:
    """Grade a run: the fail-closed rules first, then the signals over the sampled window.

    `handoff_alerts` are the alerts firing when the agent got the page; they
    do not count as new. Raises `GradingError` when the samples end before
    grading is complete (see `grading_complete`), and when the run would pass but for
    gates that are only blind (the load generator went unread: no honest verdict).
    """
    closed = _fail_closed(config, outcome)
    if closed is not None:
        return closed
    assessment = _assess(config, handoff_alerts, samples)
    stop = _stop_reason(config, assessment)
    if stop is None:
        raise GradingError(
            f"grading is not complete: samples end at t={assessment.window.last_offset:.1f}s, "
            f"the window runs to t={assessment.window.end:.1f}s and the verdict is still open"
        )
    score = assessment.score(config)
    passed = (
        stop == "window_complete" and score >= config.pass_threshold and assessment.gates_held()
    )
    blind = assessment.blind_gates()
    if not passed and blind and stop == "window_complete" and score >= config.pass_threshold:
        # Everything observed says pass; what was not observed is the harness's fault, so
        # neither verdict would be honest.
        raise GradingError(f"the harness could not observe the load: {blind[0].signal.detail}")
    signals = [assessment.weighted[k].signal for k in WEIGHTED_SIGNALS]
    gates = [gate.signal for gate in assessment.gates]
    return MitigationGrade(
        score=OracleScore(score=score, passed=passed, signals=[*signals, *gates]),
        verdict="passed" if passed else "failed",
        sli_series=[sample.to_sli_sample() for sample in samples],
        stop_reason=stop,
    )


def grading_complete(
    config: GradingConfig,
    handoff_alerts: Iterable[ObservedAlert],
    samples: Sequence[GradingSample],
) -> StopReason | None:
    """Say whether sampling can stop, and why; `None` means keep sampling.

    Stop when the window is fully observed, or when no later sample could let
    the run pass: every open signal is credited its best possible value and the
    run still falls short of the threshold, or a gate already failed for good. Signals
    only get worse with more samples once settled, so this never stops a run
    that could still pass; it never stops early towards `passed`.
    """
    return _stop_reason(config, _assess(config, handoff_alerts, samples))


def _stop_reason(config: GradingConfig, assessment: _Assessment) -> StopReason | None:
    if assessment.window.complete:
        return "window_complete"
    if assessment.window.samples and not assessment.can_still_pass(config):
        return "verdict_decided"
    return None


def _assess(
    config: GradingConfig,
    handoff_alerts: Iterable[ObservedAlert],
    samples: Sequence[GradingSample],
) -> _Assessment:
    window = window_of(config, samples)
    weighted = {
        "ci_green": _settled(
            config, "ci_green", True, "CI green; the fix was merged and redeployed"
        ),
        "alert_cleared": _alert_cleared(config, window),
        "sustained_clear": _sustained_clear(config, window),
        "time_to_clear": _time_to_clear(config, window),
        "no_new_alerts": _no_new_alerts(config, window, {a.key for a in handoff_alerts}),
    }
    declared = (
        assess_service(config, window),
        assess_client_sli(config, window),
        assess_telemetry(config, window),
        assess_monitoring(config, window),
    )
    gates = (assess_load(config, window), *(g for g in declared if g is not None))
    return _Assessment(window, weighted, gates)


def _alert_cleared(config: GradingConfig, window: Window) -> Finding:
    name, limit = config.alert_to_clear, config.max_clear_time_seconds
    if window.clear is not None:
        at, state = window.clear.offset_seconds, window.clear.target_state
        return _settled(
            config,
            "alert_cleared",
            True,
            f"{name} {state} at t={at:.1f}s (limit {limit:.1f}s{_settle(config)})",
        )
    if window.complete:
        settle = config.clear_settle_seconds
        detail = f"{name} firing at every sample from t={settle:.1f}s through t={limit:.1f}s"
        return _settled(config, "alert_cleared", False, detail)
    detail = f"{name} still firing when grading stopped at t={window.last_offset:.1f}s"
    return _open(config, "alert_cleared", detail, best_value=1.0)


def _settle(config: GradingConfig) -> str:
    settle = config.clear_settle_seconds
    if not settle:
        return ""
    return f"; counted from t={settle:.1f}s, once the alert had judged the resumed load"


def _time_to_clear(config: GradingConfig, window: Window) -> Finding:
    limit = config.max_clear_time_seconds
    if window.clear is not None:
        at = window.clear.offset_seconds
        value = _clamp01(1 - at / limit)
        detail = f"cleared after {at:.1f}s of {limit:.1f}s: 1 - t/max = {value:.3f}"
        return Finding(_signal(config, "time_to_clear", True, value, detail), value)
    if window.complete:
        return _settled(config, "time_to_clear", False, f"not cleared within {limit:.1f}s")
    best = _clamp01(1 - window.last_offset / limit)
    detail = f"not cleared when grading stopped at t={window.last_offset:.1f}s"
    return _open(config, "time_to_clear", detail, best_value=best)


def _sustained_clear(config: GradingConfig, window: Window) -> Finding:
    need = config.sustained_clear_seconds
    if window.clear is None:
        if window.complete:
            return _settled(config, "sustained_clear", False, "never cleared, nothing to sustain")
        return _open(config, "sustained_clear", "not cleared yet", best_value=1.0)
    start = window.clear.offset_seconds
    held = [s for s in window.samples if s.offset_seconds >= start]
    pending = sum(1 for s in held if s.target_state == "pending")
    refire = next((s for s in held if s.target_state == "firing"), None)
    if refire is not None:
        at = refire.offset_seconds
        detail = (
            f"fired again at t={at:.1f}s, {at - start:.1f}s after clearing at t={start:.1f}s "
            f"(needed {need:.1f}s not firing; {pending} pending samples before)"
        )
        return _settled(config, "sustained_clear", False, detail)
    gap = first_gap(held, start, config.sample_gap_limit)
    if gap is not None:
        detail = (
            f"not observed from t={gap[0]:.1f}s to t={gap[1]:.1f}s "
            f"(limit {config.sample_gap_limit:.1f}s without a sample)"
        )
        return _settled(config, "sustained_clear", False, detail)
    observed = (
        f"not firing from t={start:.1f}s to t={held[-1].offset_seconds:.1f}s "
        f"({len(held)} samples, {pending} pending)"
    )
    if window.complete:
        return _settled(config, "sustained_clear", True, f"{observed}; needed {need:.1f}s")
    detail = f"{observed}; grading stopped before the {need:.1f}s window ended"
    return _open(config, "sustained_clear", detail, best_value=1.0)


def _no_new_alerts(
    config: GradingConfig, window: Window, handoff: set[tuple[str, str | None]]
) -> Finding:
    offenders: dict[tuple[str, str | None], float] = {}
    for sample in window.samples:
        for alert in sample.firing():
            if _counts_as_new(config, alert, handoff):
                offenders.setdefault(alert.key, sample.offset_seconds)
    if offenders:
        named = "; ".join(
            f"{name} (service={service}) first at t={at:.1f}s"
            for (name, service), at in offenders.items()
        )
        return _settled(config, "no_new_alerts", False, f"new alerts fired: {named}")
    gap = first_gap(window.samples, 0.0, config.sample_gap_limit)
    if gap is not None:
        detail = (
            f"not observed from t={gap[0]:.1f}s to t={gap[1]:.1f}s "
            f"(limit {config.sample_gap_limit:.1f}s without a sample)"
        )
        return _settled(config, "no_new_alerts", False, detail)
    scope = "any service" if config.scope is None else ", ".join(sorted(config.scope))
    detail = (
        f"no new alert in scope ({scope}) fired at {len(window.samples)} samples "
        f"from t=0 to t={window.last_offset:.1f}s"
    )
    return _settled(config, "no_new_alerts", True, detail)


def _counts_as_new(
    config: GradingConfig, alert: ObservedAlert, handoff: set[tuple[str, str | None]]
) -> bool:
    if alert.name == config.alert_to_clear or alert.ambient or alert.key in handoff:
        return False
    # Without a service label an alert cannot be placed in a scope: lint requires the label.
    return config.scope is None or alert.service in config.scope


def _fail_closed(config: GradingConfig, outcome: DeliveryOutcome) -> MitigationGrade | None:
    why = f": {outcome.reason}" if outcome.reason else ""
    if not outcome.submitted:
        signal = OracleSignal(
            id="no_submission",
            satisfied=False,
            value=0.0,
            weight=1.0,
            detail=f"the agent made no submission; nothing was deployed or graded{why}",
        )
        return _zero(signal, "failed")
    if not outcome.ci_green:
        detail = f"CI was red; the fix was rejected and never deployed{why}"
        return _zero(_signal(config, "ci_green", False, 0.0, detail), "rejected")
    if not outcome.redeployed:
        signal = OracleSignal(
            id="deployed",
            satisfied=False,
            value=0.0,
            weight=1.0,
            detail=f"CI was green but the redeploy failed; the fix never became live{why}",
        )
        return _zero(signal, "failed")
    return None


def _zero(signal: OracleSignal, verdict: Literal["failed", "rejected"]) -> MitigationGrade:
    return MitigationGrade(
        score=OracleScore(score=0.0, passed=False, signals=[signal]),
        verdict=verdict,
        sli_series=[],
    )


def _weighted_mean(config: GradingConfig, values: dict[str, float]) -> float:
    total = sum(config.weights.values())
    mean = sum(config.weights[k] * values[k] for k in WEIGHTED_SIGNALS) / total
    return round(mean, _SCORE_DIGITS)


def _settled(config: GradingConfig, signal_id: str, satisfied: bool, detail: str) -> Finding:
    signal = _signal(config, signal_id, satisfied, float(satisfied), detail)
    return Finding(signal, best_value=signal.value)


def _open(config: GradingConfig, signal_id: str, detail: str, *, best_value: float) -> Finding:
    return Finding(_signal(config, signal_id, False, 0.0, detail), best_value=best_value)


def _signal(
    config: GradingConfig, signal_id: str, satisfied: bool, value: float, detail: str
) -> OracleSignal:
    weight = config.weights[signal_id]
    return OracleSignal(
        id=signal_id, satisfied=satisfied, value=value, weight=weight, detail=detail
    )


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))
