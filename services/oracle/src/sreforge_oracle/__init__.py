"""The SREForge mitigation oracle: grades a deployed fix from the run's Prometheus (SPEC §7).

`SERVICE` is its place on the bus; `grade` and `grading_complete` are the pure
algorithm; `PrometheusProbe` reads the run's Prometheus; `run_grading` samples
until grading is complete.
"""

from sreforge_oracle._adapter import SERVICE
from sreforge_oracle._errors import GradingError, OracleError, ProbeError
from sreforge_oracle._grading import SampleSource, probe_interval_for, run_grading
from sreforge_oracle._mitigation import grade, grading_complete
from sreforge_oracle._model import (
    DEFAULT_WEIGHTS,
    WEIGHTED_SIGNALS,
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    ObservedAlert,
    StopReason,
)
from sreforge_oracle._probe import PrometheusProbe

__all__ = [
    "DEFAULT_WEIGHTS",
    "SERVICE",
    "WEIGHTED_SIGNALS",
    "DeliveryOutcome",
    "GradingConfig",
    "GradingError",
    "GradingSample",
    "MitigationGrade",
    "ObservedAlert",
    "OracleError",
    "ProbeError",
    "PrometheusProbe",
    "SampleSource",
    "StopReason",
    "grade",
    "grading_complete",
    "probe_interval_for",
    "run_grading",
]
