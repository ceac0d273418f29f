"""Pure pieces of the adapter: a run's grading config, its hand-off alerts, its verdict events."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sreforge_contracts import (
    ContractError,
    RunFailed,
    ScenarioManifest,
    Scored,
    TriggerSignal,
    find_scenario,
)

from sreforge_oracle._errors import OracleError
from sreforge_oracle._grading import probe_interval_for
from sreforge_oracle._mitigation import grade
from sreforge_oracle._model import (
    DEFAULT_WEIGHTS,
    DeliveryOutcome,
    GradingConfig,
    MitigationGrade,
    ObservedAlert,
)

__all__ = [
    "PRODUCER",
    "PrometheusTiming",
    "fail_closed_scored",
    "find_manifest",
    "grading_config",
    "handoff_union",
    "oracle_failed",
    "scenario_jobs",
    "scored",
]

PRODUCER = "oracle"
_JOB = re.compile(r'\bjob\s*=\s*"([^"]+)"')


@dataclass(frozen=True)
class PrometheusTiming:
    """The run's Prometheus as it runs (already time-scaled by the deployer)."""

    eval_interval_seconds: float
    """Of the rule group holding the target alert."""
    scrape_interval_seconds: float
    alert_for_seconds: float = 0.0
    """The target alert's `for` duration."""


def find_manifest(use_cases_dir: Path, scenario_id: str) -> ScenarioManifest:
    """The manifest of `scenario_id` under `<use_cases_dir>/*/scenarios/`."""
    try:
        return find_scenario(use_cases_dir, scenario_id).manifest
    except ContractError as error:
        raise OracleError(str(error)) from error


def grading_config(
    manifest: ScenarioManifest,
    time_scale: float,
    timing: PrometheusTiming,
    *,
    load_warmup_seconds: float,
    fault_armed_at: datetime | None = None,
) -> GradingConfig:
    """The manifest's windows x `time_scale`, its weights, threshold, scope and gates.

    The probe runs every 1 s x scale, never coarser than the eval interval;
    load is judged from one scrape plus the generator's warm-up after `Deployed`;
    the alert's clear counts once it has judged that load for its `for` duration
    plus two evaluations (capped at half of max_clear_time_seconds); the gates
    tolerate a shortfall shorter than one scrape interval. `telemetry_intact` and
    `monitoring_intact` gate every run; `fault_armed_at` (the run state's
    `armed_at`) unknown fails the latter closed.
    """
    windows = manifest.eval_only(time_scale)
    verify = manifest.verify
    load_grace = timing.scrape_interval_seconds + load_warmup_seconds
    scrape = timing.scrape_interval_seconds
    settle = load_grace + timing.alert_for_seconds + 2 * timing.eval_interval_seconds
    return GradingConfig(
        alert_to_clear=windows.alert_to_clear,
        max_clear_time_seconds=windows.max_clear_time_seconds,
        sustained_clear_seconds=windows.sustained_clear_seconds,
        probe_interval_seconds=probe_interval_for(time_scale, timing.eval_interval_seconds),
        weights=dict(verify.weights),
        pass_threshold=verify.pass_threshold,
        scope=frozenset(verify.scope) or None,
        load_grace_seconds=load_grace,
        # One missed probe of a busy machine is no death: a shortfall must outlast a scrape.
        load_dip_tolerance_seconds=scrape,
        service_dip_tolerance_seconds=scrape,
        clear_settle_seconds=min(settle, windows.max_clear_time_seconds / 2),
        service_min_ok_ratio=verify.service_min_ok_ratio,
        client_latency_objective_seconds=verify.client_latency_objective_seconds,
        client_latency_objective_ratio=verify.client_latency_objective_ratio,
        client_dip_tolerance_seconds=scrape,
        telemetry_gated=True,
        telemetry_count_tolerance=None
        if verify.telemetry is None
        else verify.telemetry.count_tolerance,
        telemetry_dip_tolerance_seconds=scrape,
        monitoring_gated=True,
        fault_armed_at=fault_armed_at,
        monitoring_jobs=scenario_jobs(manifest),
        monitoring_dip_tolerance_seconds=scrape,
    )


def scenario_jobs(manifest: ScenarioManifest) -> frozenset[str]:
    """The scrape jobs the scenario's queries name (`job="..."`): grading reads their series."""
    queries = [] if manifest.expected is None else [manifest.expected.p99_promql]
    telemetry = manifest.verify.telemetry
    if telemetry is not None:
        queries += [telemetry.app_requests_promql, telemetry.load_requests_promql]
    return frozenset(job for query in queries for job in _JOB.findall(query))


def handoff_union(
    snapshot: Iterable[ObservedAlert], from_state: Iterable[TriggerSignal]
) -> list[ObservedAlert]:
    """The alerts firing at hand-off: the oracle's own snapshot plus the correlator's list."""
    found = {alert.key: alert for alert in snapshot if alert.state == "firing"}
    for signal in from_state:
        alert = ObservedAlert(name=signal.alert_name, state="firing", labels=signal.labels)
        found.setdefault(alert.key, alert)
    return list(found.values())


def scored(run_id: str, result: MitigationGrade) -> Scored:
    """The `Scored` event of a grade; its id is `<run_id>.Scored`, one per run."""
    verdict = result.verdict
    if verdict not in ("passed", "failed", "rejected"):
        raise OracleError(f"run {run_id}: the oracle cannot score a run {verdict!r}")
    return Scored(
        run_id=run_id,
        producer=PRODUCER,
        score=result.score,
        verdict=verdict,
        sli_series=result.sli_series,
    )


def fail_closed_scored(
    run_id: str, outcome: DeliveryOutcome, weights: dict[str, float] | None = None
) -> Scored:
    """Score a run that never reached grading (no submission, CI red, redeploy failed)."""
    config = GradingConfig(
        alert_to_clear="-",
        max_clear_time_seconds=1,
        sustained_clear_seconds=1,
        probe_interval_seconds=1,
        weights=dict(weights or DEFAULT_WEIGHTS),
    )
    return scored(run_id, grade(config, outcome, (), ()))


def oracle_failed(run_id: str, reason: str) -> RunFailed:
    """The oracle could not grade honestly: the run ends `error`."""
    return RunFailed(
        run_id=run_id, producer=PRODUCER, stage="oracle", verdict="error", reason=reason
    )
