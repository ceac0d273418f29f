"""The one exception tree of the recorder service."""

from __future__ import annotations

__all__ = ["EventLogError", "RecordInvalid", "RecorderError", "RunNotEnded"]


class RecorderError(Exception):
    """Base of every error the recorder raises; the message names the run, file or field."""


class RunNotEnded(RecorderError):
    """A record was asked for a run whose events hold no terminal event yet."""


class RecordInvalid(RecorderError):
    """A record does not validate against the committed run-record.v1 JSON Schema.

    `problems` holds one `field.path: message` line per violation.
    """

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: not a valid run-record.v1: " + "; ".join(problems))
        self.source = source
        self.problems = problems


class EventLogError(RecorderError):
    """A run's `events.jsonl` holds a line that is not a logged event (names file and line)."""
