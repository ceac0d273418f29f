"""NATS names: the stream, its subjects, the KV bucket and the dead-letter prefix."""

from __future__ import annotations

from sreforge_contracts._ids import check_run_id

__all__ = [
    "DEADLETTER_PREFIX",
    "RUNS_BUCKET",
    "RUN_EVENTS_SUBJECTS",
    "RUN_EVENTS_WILDCARD",
    "RUN_START_SUBJECT",
    "STREAM_NAME",
    "STREAM_SUBJECTS",
    "TRIGGER_FIRED_SUBJECT",
    "TRIGGER_RESOLVED_SUBJECT",
    "TRIGGER_SUBJECTS",
    "run_event_subject",
    "run_events_filter",
    "run_events_of_type",
]

STREAM_NAME = "SREFORGE"
STREAM_SUBJECTS = ("sreforge.>",)
RUNS_BUCKET = "sreforge-runs"
RUN_START_SUBJECT = "sreforge.run.start"
RUN_EVENTS_WILDCARD = "sreforge.run.*.*"
RUN_EVENTS_SUBJECTS = (RUN_EVENTS_WILDCARD,)
TRIGGER_FIRED_SUBJECT = "sreforge.trigger.fired"
TRIGGER_RESOLVED_SUBJECT = "sreforge.trigger.resolved"
TRIGGER_SUBJECTS = (TRIGGER_FIRED_SUBJECT, TRIGGER_RESOLVED_SUBJECT)
DEADLETTER_PREFIX = "sreforge.deadletter."
"""Dead letters go to `<prefix><durable>`; the trailing dot is part of the prefix."""


def run_event_subject(run_id: str, event_type: str) -> str:
    """The subject of a run-scoped event: `sreforge.run.<run_id>.<Type>`."""
    return f"sreforge.run.{check_run_id(run_id)}.{event_type}"


def run_events_filter(run_id: str) -> str:
    """A subscription filter for every event of one run: `sreforge.run.<run_id>.*`."""
    return f"sreforge.run.{check_run_id(run_id)}.*"


def run_events_of_type(event_type: str) -> str:
    """A filter for one event type across all runs: `sreforge.run.*.<Type>`."""
    return f"sreforge.run.*.{event_type}"
