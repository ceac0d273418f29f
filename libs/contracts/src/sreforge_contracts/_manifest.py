"""`scenario.toml`, typed: the single source of truth for timings, weights, threshold."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sreforge_contracts._base import Contract
from sreforge_contracts._contract import EvalOnly, Profile
from sreforge_contracts._ids import ScenarioId

__all__ = [
    "Determinism",
    "ExpectedSignal",
    "InjectSpec",
    "ScenarioManifest",
    "TelemetrySpec",
    "VerifySpec",
]

WEIGHT_TOLERANCE = 1e-6


class ExpectedSignal(Contract):
    """`[expected]`: the alert the agent is paged on and the SLO it encodes."""

    alert: str = Field(min_length=1)
    severity: str = "critical"
    p99_threshold_seconds: float = Field(gt=0)
    p99_promql: str = Field(min_length=1)

    @field_validator("p99_promql")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class Determinism(Contract):
    """`[determinism]`: the timing contract, in seconds at time_scale 1."""

    confirm_fire_timeout_seconds: float = Field(default=240, gt=0)
    sustained_clear_seconds: float = Field(default=360, gt=0)
    max_clear_time_seconds: float = Field(default=600, gt=0)
    alert_fired_at: str = ""

    def scaled(self, time_scale: float) -> Determinism:
        """These windows multiplied by `time_scale` (0 < s ≤ 1), their relations kept."""
        if not 0 < time_scale <= 1:
            raise ValueError(f"time_scale: {time_scale} is outside (0, 1]")
        return self.model_copy(
            update={
                "confirm_fire_timeout_seconds": self.confirm_fire_timeout_seconds * time_scale,
                "sustained_clear_seconds": self.sustained_clear_seconds * time_scale,
                "max_clear_time_seconds": self.max_clear_time_seconds * time_scale,
            }
        )


class InjectSpec(Contract):
    """`[inject]`: how the incident is made; the load never stops during verification."""

    command: str | None = None
    mode: str = Field(default="storm", min_length=1)
    continuous: bool = True
    stop_during_verification: bool = False


class TelemetrySpec(Contract):
    """`[verify.telemetry]`: the `telemetry_intact` gate's request-count cross-check.

    Over the graded window the app's own request count (`app_requests_promql`,
    the graded endpoints) must grow by the load generator's count
    (`load_requests_promql`) within `count_tolerance` (a share of the load's count).
    """

    app_requests_promql: str = Field(min_length=1)
    load_requests_promql: str = Field(min_length=1)
    count_tolerance: float = Field(default=0.1, ge=0, lt=1)

    @field_validator("app_requests_promql", "load_requests_promql")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class VerifySpec(Contract):
    """`[verify]` and `[verify.weights]`: the oracle, its signals, weights and threshold.

    `service_min_ok_ratio` declares the `service_held` gate: while graded, at least
    this share of the load generator's checked answers must be complete (its
    profile's check, e.g. every search hit enriched). Unset: the run is not gated on it.
    `ci_changed_tests` lists the hand-off tests a correct fix must change: a test file
    (`tests/test_x.py`, its submitted version is kept in CI's hand-off set) or a pytest
    node id prefix (`tests/test_x.py::test_y`, not run in the hand-off set), paths
    relative to the workspace root.
    `client_latency_objective_seconds` with `client_latency_objective_ratio` declare
    the `client_sli_held` gate: through the sustained window, at least that share of
    the load's requests answered within the objective as the load generator timed
    them (the objective must be a bucket bound of its latency histogram).
    `telemetry` declares the request-count half of `telemetry_intact`.
    """

    oracle: str = "mitigation"
    qualification_mode: str = "score-headroom"
    pass_threshold: float = Field(gt=0, le=1)
    load_active_during_scoring: bool = True
    service_min_ok_ratio: float | None = Field(default=None, gt=0, le=1)
    client_latency_objective_seconds: float | None = Field(default=None, gt=0)
    client_latency_objective_ratio: float | None = Field(default=None, gt=0, le=1)
    telemetry: TelemetrySpec | None = None
    signals: list[str] = Field(min_length=1)
    scope: list[str] = Field(default_factory=list)
    weights: dict[str, float]
    ci_changed_tests: list[str] = Field(default_factory=list)

    @field_validator("ci_changed_tests")
    @classmethod
    def _relative_test_paths(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            path = entry.split("::", 1)[0]
            parts = path.split("/")
            if not path or path.startswith("/") or ".." in parts or "\\" in path:
                raise ValueError(f"{entry!r} is not a test path relative to the workspace root")
            if not path.endswith(".py"):
                raise ValueError(f"{entry!r} does not name a .py test file")
        return entries

    @field_validator("weights")
    @classmethod
    def _weights_sum_to_one(cls, weights: dict[str, float]) -> dict[str, float]:
        negative = sorted(name for name, weight in weights.items() if weight < 0)
        if negative:
            raise ValueError(f"negative weight for {', '.join(negative)}")
        total = sum(weights.values())
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise ValueError(f"sum to {total:.6g}, expected 1.0")
        return weights

    @model_validator(mode="after")
    def _every_signal_weighted(self) -> VerifySpec:
        missing = sorted(set(self.signals) - set(self.weights))
        if missing:
            raise ValueError(f"weights: no weight for signal(s) {', '.join(missing)}")
        unknown = sorted(set(self.weights) - set(self.signals))
        if unknown:
            raise ValueError(f"weights: {', '.join(unknown)} not listed in signals")
        return self

    @model_validator(mode="after")
    def _client_objective_paired(self) -> VerifySpec:
        seconds, ratio = self.client_latency_objective_seconds, self.client_latency_objective_ratio
        if (seconds is None) != (ratio is None):
            missing = "ratio" if ratio is None else "seconds"
            raise ValueError(
                f"client_latency_objective_{missing}: the client latency objective needs "
                "both client_latency_objective_seconds and client_latency_objective_ratio"
            )
        return self


class ScenarioManifest(Contract):
    """A scenario's `scenario.toml`: identity, expected signal, timing, inject, verify.

    Incident scenarios need `[expected]` and `[inject]`; patch scenarios need a
    pinned `base_commit`.
    """

    id: ScenarioId
    use_case: str = Field(min_length=1)
    stack: str = Field(min_length=1)
    profile: Profile
    title: str = Field(min_length=1)
    family: str = Field(pattern=r"^[a-z][a-z0-9-]{0,39}$")
    """The incident family (`latency`, `errors`, `saturation`, `retry-amplification`, ...):
    what kind of failure it is, for the catalog and for comparing agents by kind."""
    difficulty: Literal["easy", "medium", "hard"]
    tags: list[str] = Field(default_factory=list)
    description: str = ""
    base_commit: str | None = None
    expected: ExpectedSignal | None = None
    determinism: Determinism = Field(default_factory=Determinism)
    inject: InjectSpec | None = None
    verify: VerifySpec
    endpoints: dict[str, str] | None = None

    def eval_only(self, time_scale: float = 1.0) -> EvalOnly:
        """The run contract's `eval_only` for this scenario at `time_scale`."""
        if self.expected is None:
            raise ValueError(f"{self.id}: a {self.profile} scenario has no alert to clear")
        windows = self.determinism.scaled(time_scale)
        return EvalOnly(
            alert_to_clear=self.expected.alert,
            max_clear_time_seconds=windows.max_clear_time_seconds,
            sustained_clear_seconds=windows.sustained_clear_seconds,
        )

    @model_validator(mode="after")
    def _profile_sections(self) -> ScenarioManifest:
        if self.profile == "incident":
            for section in ("expected", "inject"):
                if getattr(self, section) is None:
                    raise ValueError(f"{section}: an incident scenario needs [{section}]")
        elif not self.base_commit:
            raise ValueError("base_commit: a patch scenario needs a pinned base_commit")
        return self
