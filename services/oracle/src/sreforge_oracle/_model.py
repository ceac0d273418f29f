"""The oracle's inputs and output: grading config, delivery outcome, samples, grade."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sreforge_contracts import AlertState, OracleScore, SliSample, Verdict

__all__ = [
    "DEFAULT_WEIGHTS",
    "WEIGHTED_SIGNALS",
    "DeliveryOutcome",
    "GradingConfig",
    "GradingSample",
    "MitigationGrade",
    "MonitoringSnapshot",
    "ObservedAlert",
    "StopReason",
]

WEIGHTED_SIGNALS = (
    "ci_green",
    "alert_cleared",
    "sustained_clear",
    "time_to_clear",
    "no_new_alerts",
)
"""The signals that add to the score, in the order they are reported."""

DEFAULT_WEIGHTS: dict[str, float] = {
    "ci_green": 0.25,
    "alert_cleared": 0.35,
    "sustained_clear": 0.20,
    "time_to_clear": 0.10,
    "no_new_alerts": 0.10,
}
"""SPEC §7 defaults; a scenario's `[verify.weights]` replaces them."""

StopReason = Literal["window_complete", "verdict_decided"]
"""Why grading stopped: the window was fully observed, or no later sample could let it pass."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GradingConfig(_Frozen):
    """How one run is graded; every duration is already multiplied by the run's time scale.

    `scope` lists the services whose new alerts count against the run; `None`
    means every service. `max_sample_gap_seconds` (default 3 x the probe
    interval) is the longest stretch without a sample that still counts as
    observed; keep it at or below the Prometheus evaluation interval so that no
    firing evaluation can fall between two samples. `service_min_ok_ratio` declares
    the `service_held` gate (the load generator's checked answers must stay this
    complete); `None` means the run is not gated on it. `clear_settle_seconds` is
    when a not-firing sample starts to count as the alert's clear: a deploy that
    drains the load lets any alert resolve, so "not firing" means something only
    once the alert has evaluated the resumed load for its `for` duration.

    The outside-the-app gates: `client_latency_objective_seconds` with
    `client_latency_objective_ratio` declare `client_sli_held` (the load generator's
    own latency histogram); `telemetry_gated` declares `telemetry_intact` (the SLI has
    a value at every sample after the load grace) and `telemetry_count_tolerance` adds
    its request-count cross-check; `monitoring_gated` declares `monitoring_intact`
    (Prometheus and Alertmanager up since before `fault_armed_at`, unchanged, and
    scraping every job of `monitoring_jobs`: those the scenario's queries read). Each
    tolerates a shortfall shorter than its `*_tolerance_seconds`.
    """

    alert_to_clear: str = Field(min_length=1)
    max_clear_time_seconds: float = Field(gt=0)
    sustained_clear_seconds: float = Field(gt=0)
    probe_interval_seconds: float = Field(gt=0)
    max_sample_gap_seconds: float | None = Field(default=None, gt=0)
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    pass_threshold: float = Field(default=0.85, gt=0, le=1)
    scope: frozenset[str] | None = None
    load_min_ratio: float = Field(default=0.9, gt=0, le=1)
    load_grace_seconds: float = Field(default=0.0, ge=0)
    load_dip_tolerance_seconds: float = Field(default=0.0, ge=0)
    service_min_ok_ratio: float | None = Field(default=None, gt=0, le=1)
    service_dip_tolerance_seconds: float = Field(default=0.0, ge=0)
    clear_settle_seconds: float = Field(default=0.0, ge=0)
    client_latency_objective_seconds: float | None = Field(default=None, gt=0)
    client_latency_objective_ratio: float | None = Field(default=None, gt=0, le=1)
    client_dip_tolerance_seconds: float = Field(default=0.0, ge=0)
    telemetry_gated: bool = False
    telemetry_count_tolerance: float | None = Field(default=None, ge=0, lt=1)
    telemetry_dip_tolerance_seconds: float = Field(default=0.0, ge=0)
    monitoring_gated: bool = False
    fault_armed_at: datetime | None = None
    monitoring_jobs: frozenset[str] = frozenset()
    monitoring_dip_tolerance_seconds: float = Field(default=0.0, ge=0)

    @field_validator("fault_armed_at")
    @classmethod
    def _aware(cls, armed: datetime | None) -> datetime | None:
        # Prometheus reports aware times; a naive armed time is the harness's UTC.
        return armed.replace(tzinfo=UTC) if armed is not None and armed.tzinfo is None else armed

    @model_validator(mode="after")
    def _client_objective_paired(self) -> GradingConfig:
        seconds, ratio = self.client_latency_objective_seconds, self.client_latency_objective_ratio
        if (seconds is None) != (ratio is None):
            raise ValueError(
                "client_latency_objective_seconds and client_latency_objective_ratio "
                f"go together, got {seconds} and {ratio}"
            )
        return self

    @field_validator("weights")
    @classmethod
    def _five_weights(cls, weights: dict[str, float]) -> dict[str, float]:
        if set(weights) != set(WEIGHTED_SIGNALS):
            raise ValueError(
                f"expected exactly the signals {sorted(WEIGHTED_SIGNALS)}, got {sorted(weights)}"
            )
        if any(not math.isfinite(w) or w < 0 for w in weights.values()):
            raise ValueError(f"every weight must be a finite number >= 0, got {weights}")
        if sum(weights.values()) <= 0:
            raise ValueError("the weights must not all be zero")
        return weights

    @model_validator(mode="after")
    def _settle_within_clear_time(self) -> GradingConfig:
        if self.clear_settle_seconds >= self.max_clear_time_seconds:
            raise ValueError(
                f"clear_settle_seconds ({self.clear_settle_seconds}) must be below "
                f"max_clear_time_seconds ({self.max_clear_time_seconds})"
            )
        return self

    @model_validator(mode="after")
    def _gap_not_below_interval(self) -> GradingConfig:
        if self.sample_gap_limit < self.probe_interval_seconds:
            raise ValueError(
                f"max_sample_gap_seconds ({self.max_sample_gap_seconds}) is below "
                f"probe_interval_seconds ({self.probe_interval_seconds})"
            )
        return self

    @property
    def sample_gap_limit(self) -> float:
        """The longest gap between samples that still counts as an observed window."""
        if self.max_sample_gap_seconds is not None:
            return self.max_sample_gap_seconds
        return 3 * self.probe_interval_seconds


class DeliveryOutcome(_Frozen):
    """What happened to the agent's fix before grading: submitted, CI, redeploy.

    `reason` (e.g. the deploy error) is copied into the detail of a fail-closed signal.
    """

    submitted: bool
    ci_green: bool
    redeployed: bool
    reason: str = ""


class ObservedAlert(_Frozen):
    """One active alert (firing or pending) as Prometheus reports it."""

    name: str = Field(min_length=1)
    state: Literal["firing", "pending"]
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def service(self) -> str | None:
        """The alert's `service` label (every rule carries one; lint-enforced)."""
        return self.labels.get("service")

    @property
    def ambient(self) -> bool:
        """Ambient alerts (`role="ambient"`) are background noise the oracle ignores."""
        return self.labels.get("role") == "ambient"

    @property
    def key(self) -> tuple[str, str | None]:
        """Identity across samples: name and service, since instance labels change on redeploy."""
        return (self.name, self.service)


class MonitoringSnapshot(_Frozen):
    """The monitoring plane at one sample: since when it runs, with which rules and targets.

    `rules`, `targets` and `alertmanager_config` are short fingerprints (hashes) of
    what grading depends on: the rules' names, queries, `for`, labels and
    annotations; each scrape job's URLs; Alertmanager's configuration as loaded.
    `jobs` are the scrape jobs among the targets. The Alertmanager fields are `None`
    when it did not answer.
    """

    prometheus_started_at: datetime
    prometheus_config_loaded_at: datetime | None = None
    prometheus_reload_ok: bool = True
    rules: str
    targets: str
    jobs: tuple[str, ...] = ()
    alertmanager_started_at: datetime | None = None
    alertmanager_config: str | None = None


class GradingSample(_Frozen):
    """One probe of the grading window; `offset_seconds` counts from `Deployed`.

    `alerts` holds every active alert (the target's series included); `sli` is
    `None` when the SLI query had no value (no traffic answered); the load rates
    are `None` when the load generator reported nothing, and so is
    `service_ok_ratio` (the share of its checked answers that were complete over
    its window) when it had none to report or was not read. From the load
    generator's own latency histogram: `client_requests` (its count) and
    `client_within_objective` (its cumulative bucket at the objective), with
    `client_p99_seconds` its p99 gauge; `app_requests` and `load_requests` are the
    `[verify.telemetry]` counts on Prometheus; `monitoring` the monitoring plane.
    Each is `None` when not read or not answered. `from_history` marks a sample
    read back from Prometheus's TSDB (a stretch the oracle did not watch live);
    `load_unobserved` one whose read of the load generator got no answer in time, twice,
    though its port was open (the harness could not see the load; its load fields
    are `None`, which here is no evidence that the load died).
    """

    at: datetime
    offset_seconds: float
    target_state: AlertState
    alerts: tuple[ObservedAlert, ...] = ()
    sli: float | None = None
    load_achieved_rps: float | None = None
    load_target_rps: float | None = None
    service_ok_ratio: float | None = None
    client_requests: float | None = None
    client_within_objective: float | None = None
    client_p99_seconds: float | None = None
    app_requests: float | None = None
    load_requests: float | None = None
    monitoring: MonitoringSnapshot | None = None
    from_history: bool = False
    load_unobserved: bool = False

    def firing(self) -> list[ObservedAlert]:
        """The alerts firing (not merely pending) at this sample."""
        return [alert for alert in self.alerts if alert.state == "firing"]

    def to_sli_sample(self) -> SliSample:
        """This sample as an entry of the record's `sli_series`."""
        return SliSample(
            at=self.at,
            offset_seconds=self.offset_seconds,
            sli=self.sli,
            alert_state=self.target_state,
            firing_alerts=sorted({alert.name for alert in self.firing()}),
            load_achieved_rps=self.load_achieved_rps,
            load_target_rps=self.load_target_rps,
            client_p99_seconds=self.client_p99_seconds,
            client_requests=self.client_requests,
            app_requests=self.app_requests,
            load_requests=self.load_requests,
        )


class MitigationGrade(_Frozen):
    """The oracle's result: the score with its signals, the verdict and the sampled series.

    `stop_reason` is `None` when a fail-closed rule decided the run before any sampling.
    """

    score: OracleScore
    verdict: Verdict
    sli_series: list[SliSample]
    stop_reason: StopReason | None = None
