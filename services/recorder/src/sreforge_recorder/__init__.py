"""The SREForge recorder service. Keeps every run's event log and writes its one record.

`SERVICE` is what the engine runs; `recorder_service(settings)` builds one with
explicit settings. `assemble_record` (pure) folds a run's events into its
run-record.v1; `RunFolder` / `RecordBank` are the artifact layout and the bank.
"""

from sreforge_recorder._adapter import CONSUMER, SERVICE, Recorder, recorder_service
from sreforge_recorder._assemble import (
    TERMINAL_TYPES,
    assemble_record,
    is_terminal,
    run_events_until_end,
    submission_of,
)
from sreforge_recorder._banking import VERDICT_BEARING, Banking, bank_refusal
from sreforge_recorder._errors import EventLogError, RecorderError, RecordInvalid, RunNotEnded
from sreforge_recorder._settings import RecorderSettings
from sreforge_recorder._store import (
    RecordBank,
    RecordSchema,
    RunArtifacts,
    RunFolder,
    read_agent_transcript,
)
from sreforge_recorder._transcript import LoggedEvent, render_transcript, transcript_line

__all__ = [
    "CONSUMER",
    "SERVICE",
    "TERMINAL_TYPES",
    "VERDICT_BEARING",
    "Banking",
    "EventLogError",
    "LoggedEvent",
    "RecordBank",
    "RecordInvalid",
    "RecordSchema",
    "Recorder",
    "RecorderError",
    "RecorderSettings",
    "RunArtifacts",
    "RunFolder",
    "RunNotEnded",
    "assemble_record",
    "bank_refusal",
    "is_terminal",
    "read_agent_transcript",
    "recorder_service",
    "render_transcript",
    "run_events_until_end",
    "submission_of",
    "transcript_line",
]
