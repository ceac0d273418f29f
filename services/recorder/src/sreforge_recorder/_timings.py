"""Per-phase timings of a run from its event timestamps. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sreforge_contracts import PhaseTimings

__all__ = ["PHASES", "phase_timings"]

PHASES: tuple[tuple[str, str, str], ...] = (
    ("stack", "RunRequested", "StackReady"),
    ("arm", "StackReady", "FaultArmed"),
    ("trigger", "FaultArmed", "RunTriggered"),
    ("context", "RunTriggered", "BriefReady"),
    ("run", "BriefReady", "Submitted"),
    ("ci", "Submitted", "CiResult"),
    ("redeploy", "CiResult", "Deployed"),
    ("verify", "Deployed", "Scored"),
)
"""(timing field, event that starts the phase, event that ends it), in run order.

`trigger` is the confirm-fire wait, `run` the agent, `redeploy` the merge +
redeploy + readiness gate (no event separates the merge), `verify` the grading.
"""


def phase_timings(
    seen: Mapping[str, datetime],
    *,
    ended_by: str,
    ended_at: datetime,
    started_at: datetime,
    recorded_at: datetime,
) -> PhaseTimings:
    """Milliseconds per phase from the first time each event type was seen.

    A phase whose end event is missing is absent, except the phase a failure cut
    short (`ended_by` RunFailed/RunRejected): it runs to `ended_at`. `record` spans
    the terminal event to `recorded_at`; `total` (when the contract has it) spans
    the whole run. Clock skew between producers never yields a negative span.
    """
    spans: dict[str, float | None] = {}
    in_progress = _phase_cut_short(seen) if ended_by in ("RunFailed", "RunRejected") else None
    for name, start_type, end_type in PHASES:
        start = seen.get(start_type)
        end = seen.get(end_type)
        if start is not None and end is None and name == in_progress:
            end = ended_at
        spans[name] = _ms(start, end)
    spans["record"] = _ms(ended_at, recorded_at)
    spans["total"] = _ms(started_at, ended_at)
    fields = PhaseTimings.model_fields
    return PhaseTimings.model_validate({k: v for k, v in spans.items() if k in fields})


def _phase_cut_short(seen: Mapping[str, datetime]) -> str | None:
    """The latest phase that started but never ended."""
    for name, start_type, end_type in reversed(PHASES):
        if end_type in seen:
            return None
        if start_type in seen:
            return name
    return None


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds() * 1000.0)
