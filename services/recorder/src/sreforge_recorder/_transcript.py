"""The engine's human-readable log of a run (`transcript.txt`): one line per event. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC

from sreforge_contracts import (
    BriefReady,
    CiResult,
    CleanedUp,
    Deployed,
    Event,
    FaultArmed,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    Scored,
    StackReady,
    Submitted,
)

__all__ = ["LoggedEvent", "render_transcript", "transcript_line"]

_MAX_TEXT = 200


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a run as the recorder keeps it: where it sat in the stream, and what."""

    seq: int
    subject: str
    event: Event


def render_transcript(events: Iterable[LoggedEvent]) -> str:
    """The whole log: one line per event, in the given order, with a trailing newline."""
    return "".join(transcript_line(logged.event) + "\n" for logged in events)


def transcript_line(event: Event) -> str:
    """`<ISO time>  <Type>  <producer>  <summary>` on one line."""
    stamp = event.occurred_at.astimezone(UTC).isoformat(timespec="milliseconds")
    stamp = stamp.replace("+00:00", "Z")
    return f"{stamp}  {event.type:<13} {event.producer:<11} {_summary(event)}".rstrip()


def _summary(event: Event) -> str:
    match event:
        case RunRequested():
            return _pairs(scenario=event.scenario, agent=event.agent, time_scale=event.time_scale)
        case RunRejected():
            return _pairs(scenario=event.scenario, reason=event.reason)
        case StackReady():
            return _pairs(stack=event.stack, run_dir=event.run_dir)
        case FaultArmed():
            return _pairs(delivery_mode=event.delivery_mode, load_target_rps=event.load_target_rps)
        case RunTriggered():
            alert = event.trigger
            return _pairs(alert=alert.alert_name, source=alert.source, signals=len(alert.signals))
        case BriefReady():
            workspace = event.contract.agent_context.run_workspace.path
            return _pairs(page_chars=len(event.page), workspace=workspace)
        case Submitted():
            return _submission_summary(event)
        case CiResult():
            return _pairs(green=event.green, exit=event.exit_code, duration_ms=event.duration_ms)
        case Deployed():
            return _pairs(
                redeployed=event.redeployed,
                service=event.service,
                readiness=event.readiness,
                duration_ms=event.duration_ms,
                error=event.error,
            )
        case Scored():
            score = event.score
            signals = {s.id: "ok" if s.satisfied else "no" for s in score.signals}
            return _pairs(score=round(score.score, 3), passed=score.passed, **signals)
        case Recorded():
            return _pairs(verdict=event.verdict, sha256=event.sha256[:12], path=event.path)
        case CleanedUp():
            return _pairs(verified=event.verified, leftovers=len(event.leftovers))
        case RunFailed():
            return _pairs(stage=event.stage, verdict=event.verdict, reason=event.reason)
    return ""


def _pairs(**fields: object) -> str:
    """`key=value` pairs on one line; None values are left out, floats kept short."""
    parts = []
    for key, value in fields.items():
        if value is None:
            continue
        text = f"{value:g}" if isinstance(value, float) else _one_line(str(value))
        parts.append(f"{key}={text}")
    return " ".join(parts)


def _submission_summary(event: Submitted) -> str:
    submission = event.submission
    ended = submission.agent_exit
    return _pairs(
        agent=submission.agent_name,
        submitted=submission.submitted,
        diff_lines=len(submission.diff.splitlines()),
        rca="yes" if submission.rca else "no",
        stop_reason=submission.stop_reason,
        exit=ended.exit_code if ended else None,
        timeout=ended.timeout if ended else None,
    )


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_TEXT else flat[: _MAX_TEXT - 1] + "…"
