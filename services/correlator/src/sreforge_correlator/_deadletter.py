"""Dead letters of run-scoped work, pure: what a dead letter says, and how it fails its run.

A service's worker publishes a message it gave up on to `sreforge.deadletter.<durable>`
with headers naming the durable, the original subject, the last error and (for a run's
subject) the run. The run that work belonged to can no longer make progress, so the
correlator ends it at once with RunFailed{verdict=error} instead of letting it time out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sreforge_bus import (
    DEADLETTER_PREFIX,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_ERROR,
    HEADER_DEADLETTER_RUN_ID,
    HEADER_DEADLETTER_SUBJECT,
)
from sreforge_contracts import (
    ContractError,
    Event,
    RunFailed,
    RunState,
    TriggerFired,
    TriggerResolved,
    parse_event,
)

from sreforge_correlator._machine import PRODUCER

__all__ = ["DeadLetter", "dead_letter_failure", "failed_by"]


@dataclass(frozen=True)
class DeadLetter:
    """One message a service gave up on, as its dead-letter headers and body describe it."""

    durable: str
    subject: str
    error: str
    run_id: str | None
    event: Event | None
    """The original message parsed as an event; None when it is not one (malformed)."""

    @classmethod
    def read(cls, data: bytes, headers: Mapping[str, str], subject: str) -> DeadLetter:
        """Describe the dead letter stored on `subject` with `headers` and body `data`."""
        durable = headers.get(HEADER_DEADLETTER_DURABLE) or subject.removeprefix(DEADLETTER_PREFIX)
        try:
            event: Event | None = parse_event(data)
        except ContractError:
            event = None
        return cls(
            durable=durable,
            subject=headers.get(HEADER_DEADLETTER_SUBJECT, "?"),
            error=headers.get(HEADER_DEADLETTER_ERROR) or "no error recorded",
            run_id=headers.get(HEADER_DEADLETTER_RUN_ID) or (event.run_id if event else None),
            event=event,
        )

    @property
    def event_type(self) -> str:
        """The original message's event type, or `malformed message`."""
        return self.event.type if self.event is not None else "malformed message"

    @property
    def route(self) -> str | None:
        """The alert route of a dead-lettered trigger (its run is found through it)."""
        if isinstance(self.event, TriggerFired | TriggerResolved):
            return self.event.trigger.route
        return None


def dead_letter_failure(letter: DeadLetter, run_id: str, now: datetime) -> RunFailed:
    """The RunFailed{stage=<durable>, verdict=error} a dead letter of `run_id` causes.

    Its id and reason depend only on the dead letter, so handling it again (a
    redelivery after a crash) yields the same event, deduplicated on the bus.
    """
    return RunFailed(
        event_id=f"{run_id}.RunFailed.deadletter.{letter.durable}",
        run_id=run_id,
        producer=PRODUCER,
        occurred_at=now,
        stage=letter.durable,
        reason=f"{letter.durable} dead-lettered {letter.event_type} ({letter.error})",
        verdict="error",
    )


def failed_by(state: RunState, failed: RunFailed) -> bool:
    """Whether `state` ended by exactly this failure (so it is still owed on the bus)."""
    return state.phase == "failed" and state.failure == f"{failed.stage}: {failed.reason}"
