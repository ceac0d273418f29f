"""Oracle scores, SLI samples and the verdict: the graded core of a run record."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from sreforge_contracts._base import Contract

__all__ = ["AlertState", "OracleScore", "OracleSignal", "SliSample", "Verdict"]

Verdict = Literal["passed", "failed", "rejected", "aborted", "error"]
"""How a run ended: passed/failed by the oracle, rejected by CI, aborted or error."""

AlertState = Literal["firing", "pending", "inactive"]
"""The target alert's state in one Prometheus sample."""


class OracleSignal(Contract):
    """One weighted signal of an oracle (e.g. `ci_green`, `alert_cleared`)."""

    id: str = Field(min_length=1)
    satisfied: bool
    value: float = Field(ge=0.0, le=1.0)
    weight: float = Field(ge=0.0)
    detail: str


class OracleScore(Contract):
    """An oracle's graded result; `passed` is `score >= pass_threshold`.

    A compound oracle keeps its per-phase scores in `sub_scores`.
    """

    oracle_id: str = "mitigation"
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    signals: list[OracleSignal]
    sub_scores: list[OracleScore] = Field(default_factory=list)


class SliSample(Contract):
    """One probe of the grading window: the SLI from both vantage points, the alerts, the load."""

    at: datetime
    offset_seconds: float
    sli: float | None
    alert_state: AlertState
    firing_alerts: list[str] = Field(default_factory=list)
    load_achieved_rps: float | None = None
    load_target_rps: float | None = None
    client_p99_seconds: float | None = None
    """The load generator's own p99 (its sliding window), as its clients saw the app."""
    client_requests: float | None = None
    """The load generator's latency-histogram count (completed load requests)."""
    app_requests: float | None = None
    """The app's own request count for the graded endpoints (`[verify.telemetry]`)."""
    load_requests: float | None = None
    """The load generator's request count on Prometheus (`[verify.telemetry]`)."""
