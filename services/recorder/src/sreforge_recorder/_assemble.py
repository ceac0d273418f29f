"""Fold a run's events, in stream order, into its run-record.v1. Pure: no I/O, no clock.

What ends a run for the recorder: the first `Scored`, `RunFailed` or `RunRejected`.
Events after it (Recorded, CleanedUp, a late RunFailed) are logged but never
change the record, which is written once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from sreforge_contracts import (
    AGENT_DIR,
    SCENARIO_ID_PATTERN,
    AgentTranscript,
    BriefReady,
    CiResult,
    Deployed,
    Event,
    OracleScore,
    Profile,
    RunFailed,
    RunRecord,
    RunRejected,
    RunRequested,
    RunTriggered,
    Scored,
    StackReady,
    Submission,
    Submitted,
    TopologyName,
    Trajectory,
    Trigger,
    Verdict,
)

from sreforge_recorder._errors import RunNotEnded
from sreforge_recorder._timings import phase_timings
from sreforge_recorder._transcript import LoggedEvent, render_transcript

__all__ = [
    "TERMINAL_TYPES",
    "assemble_record",
    "is_terminal",
    "run_events_until_end",
    "submission_of",
    "with_kept_files",
]

TERMINAL_TYPES = frozenset({"Scored", "RunFailed", "RunRejected"})
"""Event types that end a run for the recorder: the record is written on the first one."""

UNKNOWN_SCENARIO = "unknown"
"""`scenario_id` of a record whose run never named a valid scenario (a rejected start)."""

_E = TypeVar("_E", bound=Event)


def is_terminal(event: Event) -> bool:
    """Whether `event` ends the run (and so triggers writing its record)."""
    return event.type in TERMINAL_TYPES


def run_events_until_end(events: Sequence[LoggedEvent]) -> list[LoggedEvent]:
    """The events in stream order, up to and including the first terminal one.

    Raises `RunNotEnded` when none of them ends the run.
    """
    ordered = sorted(events, key=lambda logged: logged.seq)
    for index, logged in enumerate(ordered):
        if is_terminal(logged.event):
            return ordered[: index + 1]
    run = ordered[0].event.run_id if ordered else "?"
    raise RunNotEnded(f"run {run}: no Scored, RunFailed or RunRejected among {len(ordered)} events")


def assemble_record(
    events: Sequence[LoggedEvent],
    *,
    recorded_at: datetime,
    engine_version: str | None = None,
    agent_transcript: AgentTranscript | None = None,
) -> RunRecord:
    """Build the run's record from its events (any order; sorted by stream sequence).

    Missing events leave their sections empty (`trigger`/`ci`/`deploy` null, a zero
    score), so every run that ended yields a schema-valid record.
    """
    run = run_events_until_end(events)
    found = [logged.event for logged in run]
    end = found[-1]
    requested = _first(found, RunRequested)
    ci = _first(found, CiResult)
    deployed = _first(found, Deployed)
    scored = _first(found, Scored)
    verdict, abort_reason = _verdict(end)
    started_at = _started_at(found)
    seen = _first_seen(found)
    return RunRecord(
        run_id=_run_id(end),
        scenario_id=_scenario_id(found),
        profile=_profile(found),
        trigger=_trigger(found),
        trajectory=_trajectory(found, render_transcript(run)),
        diff=_diff(found),
        ci=ci.outcome() if ci else None,
        deploy=deployed.outcome() if deployed else None,
        score=scored.score if scored else _zero_score(),
        verdict=verdict,
        timings=phase_timings(
            seen,
            ended_by=end.type,
            ended_at=end.occurred_at,
            started_at=started_at,
            recorded_at=recorded_at,
        ),
        started_at=started_at,
        finished_at=max(end.occurred_at, started_at),
        agent_transcript=agent_transcript,
        time_scale=requested.time_scale if requested else None,
        topology=_topology(found, requested),
        sli_series=list(scored.sli_series) if scored else None,
        abort_reason=abort_reason,
        engine_version=engine_version,
        proof_run=_proof_run(found),
    )


def _verdict(end: Event) -> tuple[Verdict, str | None]:
    """The verdict (the oracle's, or the failure's) and, for aborted/error runs, why."""
    if isinstance(end, RunFailed):
        return end.verdict, f"{end.stage}: {end.reason}"
    if isinstance(end, RunRejected):
        return "aborted", f"run.start rejected: {end.reason}"
    assert isinstance(end, Scored)
    return end.verdict, None


def _first(events: Sequence[Event], kind: type[_E]) -> _E | None:
    return next((event for event in events if isinstance(event, kind)), None)


def _first_seen(events: Sequence[Event]) -> dict[str, datetime]:
    seen: dict[str, datetime] = {}
    for event in events:
        seen.setdefault(event.type, event.occurred_at)
    return seen


def _started_at(events: Sequence[Event]) -> datetime:
    requested = _first(events, RunRequested)
    if requested is not None:
        return requested.occurred_at
    return min(event.occurred_at for event in events)


def _run_id(end: Event) -> str:
    assert end.run_id is not None, "run events always carry a run_id"
    return end.run_id


def _scenario_id(events: Sequence[Event]) -> str:
    requested = _first(events, RunRequested)
    if requested is not None:
        return requested.scenario
    brief = _first(events, BriefReady)
    if brief is not None:
        return brief.contract.scenario.id
    rejected = _first(events, RunRejected)
    named = rejected.scenario if rejected else None
    if named and re.fullmatch(SCENARIO_ID_PATTERN, named) and len(named) <= 100:
        return named
    return UNKNOWN_SCENARIO


def _profile(events: Sequence[Event]) -> Profile:
    brief = _first(events, BriefReady)
    return brief.contract.scenario.profile if brief else "incident"


def _trigger(events: Sequence[Event]) -> Trigger | None:
    triggered = _first(events, RunTriggered)
    return triggered.trigger if triggered else None


def _trajectory(events: Sequence[Event], transcript: str) -> Trajectory:
    submitted = _first(events, Submitted)
    if submitted is not None:
        submission = submitted.submission
        return Trajectory(
            agent_name=submission.agent_name,
            diff=submission.diff,
            submitted=submission.submitted,
            duration_ms=submission.duration_ms,
            transcript=transcript,
            agent_exit=submission.agent_exit,
            restarts=submission.restarts,
        )
    requested = _first(events, RunRequested)
    agent = requested.agent if requested else "unknown"
    return Trajectory(
        agent_name=agent, diff="", submitted=False, duration_ms=0, transcript=transcript
    )


def _diff(events: Sequence[Event]) -> str:
    submitted = _first(events, Submitted)
    return submitted.submission.diff if submitted else ""


def _topology(events: Sequence[Event], requested: RunRequested | None) -> TopologyName | None:
    """Where the stack ran: as the deployer resolved it, else as requested (a request
    naming none and never provisioned: unknown)."""
    ready = _first(events, StackReady)
    if ready is not None and ready.topology is not None:
        return ready.topology
    return requested.topology if requested else None


def _proof_run(events: Sequence[Event]) -> bool:
    """Whether the gateway ran the agent as a labelled proof run (an unverified profile)."""
    submitted = _first(events, Submitted)
    return submitted is not None and submitted.submission.evidence.get("proof_run") is True


def _zero_score() -> OracleScore:
    """The score of a run the oracle never graded: zero, not passed, no signals."""
    return OracleScore(oracle_id="mitigation", score=0.0, passed=False, signals=[])


def submission_of(events: Sequence[LoggedEvent]) -> Submission | None:
    """The run's submission (from its first Submitted before the end), if the agent got that far."""
    submitted = _first([logged.event for logged in run_events_until_end(events)], Submitted)
    return submitted.submission if submitted else None


def with_kept_files(transcript: AgentTranscript, kept: Sequence[str]) -> AgentTranscript:
    """The transcript listing only the files that were kept in the run's folder
    (`raw_json.files` paths are relative to it; `kept` to its `agent/`)."""
    raw = transcript.raw_json
    files = raw.get("files") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(files, list):
        return transcript
    present = {f"{AGENT_DIR}/{name}" for name in kept}
    listed = [f for f in files if isinstance(f, dict) and f.get("path") in present]
    if len(listed) == len(files):
        return transcript
    gone = len(files) - len(listed)
    return transcript.model_copy(update={"raw_json": {**raw, "files": listed, "files_lost": gone}})
