"""The SREForge mitigation oracle: grades a deployed fix from the run's Prometheus (SPEC §7).

`SERVICE` is its place on the bus (`oracle_service` builds one with other
settings); `grade` and `grading_complete` are the pure
algorithm; `PrometheusProbe` reads the run's Prometheus; `run_grading` samples
until grading is complete.
"""

from sreforge_oracle._adapter import (
    BRIEF_CONSUMER,
    CI_CONSUMER,
    DEPLOYED_CONSUMER,
    SERVICE,
    SUBMITTED_CONSUMER,
    Oracle,
    OracleService,
    oracle_service,
)
from sreforge_oracle._errors import GradingError, GradingInterrupted, OracleError, ProbeError
from sreforge_oracle._grading import GapFiller, SampleSource, probe_interval_for, run_grading
from sreforge_oracle._history import history_samples
from sreforge_oracle._journal import Outcome, RunJournal
from sreforge_oracle._mitigation import grade, grading_complete
from sreforge_oracle._model import (
    DEFAULT_WEIGHTS,
    WEIGHTED_SIGNALS,
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    MonitoringSnapshot,
    ObservedAlert,
    StopReason,
)
from sreforge_oracle._probe import PrometheusProbe
from sreforge_oracle._run_config import (
    PrometheusTiming,
    fail_closed_scored,
    find_manifest,
    grading_config,
    handoff_union,
)
from sreforge_oracle._settings import OracleSettings

__all__ = [
    "BRIEF_CONSUMER",
    "CI_CONSUMER",
    "DEFAULT_WEIGHTS",
    "DEPLOYED_CONSUMER",
    "SERVICE",
    "SUBMITTED_CONSUMER",
    "WEIGHTED_SIGNALS",
    "DeliveryOutcome",
    "GapFiller",
    "GradingConfig",
    "GradingError",
    "GradingInterrupted",
    "GradingSample",
    "MitigationGrade",
    "MonitoringSnapshot",
    "ObservedAlert",
    "Oracle",
    "OracleError",
    "OracleService",
    "OracleSettings",
    "Outcome",
    "ProbeError",
    "PrometheusProbe",
    "PrometheusTiming",
    "RunJournal",
    "SampleSource",
    "StopReason",
    "fail_closed_scored",
    "find_manifest",
    "grade",
    "grading_complete",
    "grading_config",
    "handoff_union",
    "history_samples",
    "oracle_service",
    "probe_interval_for",
    "run_grading",
]
