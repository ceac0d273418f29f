"""The only file I/O of reports: a run's folder and a campaign's folder, read leniently.

`runs/<run_id>/` (the recorder's, `SREFORGE_RECORDER_RUNS_DIR`, default `runs`) and
`campaigns/<id>/` (`SREFORGE_CAMPAIGNS_DIR`, default `campaigns`). A missing optional
artifact is None; a missing or unreadable record is a `ReportError` naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sreforge_contracts import (
    AgentTranscript,
    ContractError,
    Diagnosis,
    Event,
    RunRecord,
    parse_diagnosis,
    parse_event,
    parse_run_record,
)

__all__ = [
    "CampaignBundle",
    "ReportError",
    "RunBundle",
    "campaigns_dir",
    "load_campaign",
    "load_run",
    "runs_dir",
]


class ReportError(Exception):
    """A report's input is missing or unreadable (the message names the file); the CLI
    prints it and exits 2, like its own errors."""


@dataclass(frozen=True)
class RunBundle:
    """Everything one run's folder says: the record and the artifacts beside it."""

    folder: Path
    record: RunRecord
    events: list[Event] = field(default_factory=list)
    rca: str | None = None
    diagnosis: Diagnosis | None = None
    diagnosis_skipped: str | None = None
    transcript: AgentTranscript | None = None


@dataclass(frozen=True)
class CampaignBundle:
    """A campaign's folder: its summary, its result lines and where its runs live."""

    folder: Path
    summary: dict[str, Any]
    results: list[dict[str, Any]]
    runs: Path


def runs_dir() -> Path:
    """Where the recorder writes run folders (`SREFORGE_RECORDER_RUNS_DIR`, default `runs`)."""
    return Path(os.environ.get("SREFORGE_RECORDER_RUNS_DIR") or "runs")


def campaigns_dir() -> Path:
    """Where campaign folders are (`SREFORGE_CAMPAIGNS_DIR`, default `campaigns`)."""
    return Path(os.environ.get("SREFORGE_CAMPAIGNS_DIR") or "campaigns")


def load_run(folder: Path) -> RunBundle:
    """Read `folder` (a run's folder): the record, its events and the optional artifacts."""
    path = folder / "record.json"
    try:
        record = parse_run_record(path.read_bytes(), str(path))
    except FileNotFoundError:
        raise ReportError(f"{path}: no record (the run has not ended, or is elsewhere)") from None
    except ContractError as error:
        raise ReportError(f"{path}: not a run record: {error}") from None
    return RunBundle(
        folder=folder,
        record=record,
        events=_events(folder / "events.jsonl"),
        rca=_text(folder / "rca.txt"),
        diagnosis=_diagnosis(folder / "diagnosis.json"),
        diagnosis_skipped=_skipped(folder / "diagnosis-skipped.json"),
        transcript=_transcript(record, folder),
    )


def load_campaign(folder: Path) -> CampaignBundle:
    """Read a campaign folder's `summary.json` and `results.jsonl`."""
    path = folder / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no summary (run or resume the campaign first)") from None
    except ValueError as error:
        raise ReportError(f"{path}: not JSON: {error}") from None
    results = []
    lines = _text(folder / "results.jsonl") or ""
    for line in lines.splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill
    last = {(r.get("agent"), r.get("scenario"), r.get("trial")): r for r in results}
    return CampaignBundle(folder, summary, list(last.values()), runs_dir())


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


def _events(path: Path) -> list[Event]:
    found: list[Event] = []
    for line in (_text(path) or "").splitlines():
        try:
            found.append(parse_event(json.dumps(json.loads(line)["event"])))
        except (ValueError, KeyError, TypeError, ContractError):
            continue  # a torn last line, or an event type this version does not know
    return found


def _diagnosis(path: Path) -> Diagnosis | None:
    text = _text(path)
    if text is None:
        return None
    try:
        return parse_diagnosis(text, str(path))
    except ContractError:
        return None


def _skipped(path: Path) -> str | None:
    text = _text(path)
    if text is None:
        return None
    try:
        return str(json.loads(text).get("reason", "not judged"))
    except (ValueError, AttributeError):
        return "not judged"


def _transcript(record: RunRecord, folder: Path) -> AgentTranscript | None:
    if isinstance(record.agent_transcript, AgentTranscript):
        return record.agent_transcript
    for path in (folder / "agent-transcript.json", folder / "agent" / "agent-transcript.json"):
        text = _text(path)
        if text is not None:
            try:
                return AgentTranscript.model_validate_json(text)
            except ValueError:
                continue
    return None
