"""The recorder's only file I/O: run folders, the record schema, the record bank.

`runs/<run_id>/` holds `events.jsonl` (every event once, in stream order),
`transcript.txt`, and from the run's end `record.json` (schema-checked, written
atomically and only once), `diff.patch`, `agent-transcript.json`, `rca.txt`,
`banking.json` and `agent/` (the agent's kept files, copied from the runner's
agent folder before the stack's cleanup removes it). The bank holds pruned
records under the use-cases tree and full records in a content-addressed store.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from pydantic import ValidationError
from sreforge_confine import UntrustedFileRefused, read_untrusted
from sreforge_contracts import (
    AGENT_DIR,
    AgentTranscript,
    ContractError,
    RunRecord,
    canonical_json,
    check_run_id,
    parse_event,
    parse_run_record,
)

from sreforge_recorder._banking import Banking, bank_refusal
from sreforge_recorder._errors import EventLogError, RecorderError, RecordInvalid
from sreforge_recorder._transcript import LoggedEvent, render_transcript

__all__ = [
    "MAX_AGENT_FILE_BYTES",
    "RecordBank",
    "RecordSchema",
    "RunArtifacts",
    "RunFolder",
    "read_agent_transcript",
]

MAX_AGENT_FILE_BYTES = 64_000_000
"""A kept agent file larger than this is not copied (the runner caps its files below it)."""
_MAX_AGENT_FILES = 1000

T = TypeVar("T")


class RecordSchema:
    """The committed run-record.v1 JSON Schema, checked before any record is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise RecorderError(
                f"run-record schema {path}: cannot load ({error}); "
                "set SREFORGE_RECORDER_SCHEMA_PATH to the committed run-record.v1.schema.json"
            ) from None
        self._validator = Draft202012Validator(schema)

    def check(self, record: RunRecord, source: str) -> dict[str, Any]:
        """Return the record's JSON data, or raise `RecordInvalid` naming each bad field."""
        data: dict[str, Any] = record.model_dump(mode="json")
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            problems = [f"{_dotted(e.absolute_path) or '(record)'}: {e.message}" for e in errors]
            raise RecordInvalid(source, problems)
        return data


@dataclass(frozen=True, slots=True)
class RunArtifacts:
    """The files written beside a record, when the run produced them (None: not written)."""

    diff: str | None = None
    rca: str | None = None
    agent_transcript: AgentTranscript | None = None


class RunFolder:
    """`<runs_dir>/<run_id>/`: one run's event log, artifacts and its one record.

    Every change happens under an exclusive lock on the folder, so concurrent
    handlers (or recorder processes sharing the folder) never interleave.
    """

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.run_id = check_run_id(run_id)
        self.path = runs_dir / run_id
        self.events_path = self.path / "events.jsonl"
        self.transcript_path = self.path / "transcript.txt"
        self.record_path = self.path / "record.json"

    def add_event(self, logged: LoggedEvent) -> bool:
        """Log `logged` once: False when an event with its `event_id` is already logged.

        Appends in the common case; an event arriving out of stream order (a
        redelivery) rewrites the log in order. `transcript.txt` follows suit.
        """
        with self._locked():
            events, clean = self._read_events()
            if any(known.event.event_id == logged.event.event_id for known in events):
                return False
            ordered = sorted([*events, logged], key=lambda known: known.seq)
            if clean and ordered[-1] is logged:
                with self.events_path.open("a", encoding="utf-8") as log:
                    log.write(_event_line(logged))
            else:
                _write_atomic(self.events_path, "".join(_event_line(e) for e in ordered))
            _write_atomic(self.transcript_path, render_transcript(ordered))
            return True

    def events(self) -> list[LoggedEvent]:
        """Every logged event, in stream order (a torn last line is dropped)."""
        with self._locked():
            return self._read_events()[0]

    def read_record(self) -> RunRecord | None:
        """The written record, or None when the run has none yet."""
        try:
            text = self.record_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return parse_run_record(text, source=str(self.record_path))

    def record_sha256(self) -> str:
        """The sha256 of `record.json` as written (its canonical JSON)."""
        return hashlib.sha256(self.record_path.read_bytes()).hexdigest()

    def write_record(
        self, record: RunRecord, schema: RecordSchema, artifacts: RunArtifacts
    ) -> bool:
        """Write the artifacts, then `record.json`, once: False if a record already exists.

        The record is checked against `schema` first (`RecordInvalid`, nothing
        written); it is created atomically and never overwritten.
        """
        with self._locked():
            if self.record_path.exists():
                return False
            schema.check(record, str(self.record_path))
            self._write_artifacts(artifacts)
            return _create_once(self.record_path, record.canonical_json())

    def keep_agent_files(self, source: Path, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """Copy the runner's kept agent files `names` (relative to `source`) into
        `agent/`; return the names copied and, for the others, why not.

        Only plain relative paths to regular files inside `source` are copied (no
        symlink, nothing over `MAX_AGENT_FILE_BYTES`).
        """
        copied: list[str] = []
        refused: list[str] = []
        with self._locked():
            for name in names[:_MAX_AGENT_FILES]:
                problem = _copy_kept(source, name, self.path / AGENT_DIR)
                if problem is None:
                    copied.append(name)
                else:
                    refused.append(f"{name[:200]}: {problem}")
        if len(names) > _MAX_AGENT_FILES:
            refused.append(f"{len(names) - _MAX_AGENT_FILES} more files: over {_MAX_AGENT_FILES}")
        return copied, refused

    def redact(self, sweep: Callable[[Path], T]) -> T:
        """Run `sweep` over the folder under its lock (no event is logged meanwhile)."""
        with self._locked():
            return sweep(self.path)

    def write_banking(self, banking: Banking) -> Path:
        """Write `banking.json` (what banking did with the record, or why it refused)."""
        path = self.path / "banking.json"
        _write_atomic(path, canonical_json(banking.as_json()))
        return path

    def _write_artifacts(self, artifacts: RunArtifacts) -> None:
        if artifacts.diff is not None:
            _write_atomic(self.path / "diff.patch", artifacts.diff)
        if artifacts.rca is not None:
            _write_atomic(self.path / "rca.txt", artifacts.rca)
        if artifacts.agent_transcript is not None:
            data = artifacts.agent_transcript.model_dump(mode="json")
            _write_atomic(self.path / "agent-transcript.json", canonical_json(data))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / ".lock").open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _read_events(self) -> tuple[list[LoggedEvent], bool]:
        """The logged events, and whether the file ends cleanly (no torn last line)."""
        try:
            text = self.events_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return [], True
        lines = text.split("\n")
        torn = lines.pop()  # "" when the file ends with a newline
        events = [
            _parse_line(line, f"{self.events_path}:{number}")
            for number, line in enumerate(lines, start=1)
            if line
        ]
        return events, torn == ""


class RecordBank:
    """Where records are banked: pruned copies in the use-cases tree, full ones by sha256.

    Pruned: `<records_root>/<uc>/scenarios/<scenario_id>/records/<run_id>.json`
    (only when that scenario folder exists). Full: `<store_dir>/sha256/<2>/<64>.json`.
    Both are write-once; banking again is a no-op.
    """

    def __init__(self, store_dir: Path, records_root: Path) -> None:
        self.store_dir = store_dir
        self.records_root = records_root

    def store_path(self, sha256: str) -> Path:
        """The content-addressed path of the full record with this sha256."""
        return self.store_dir / "sha256" / sha256[:2] / f"{sha256}.json"

    def bank(self, record: RunRecord, schema: RecordSchema, *, allow_unlabelled: bool) -> Banking:
        """Bank `record`, or refuse it (a verdict without a labelled agent transcript)."""
        sha256 = record.sha256()
        store_path = self.store_path(sha256)
        grandfathered = store_path.exists()
        refusal = None if grandfathered else bank_refusal(record, allow_unlabelled=allow_unlabelled)
        if refusal is not None:
            return Banking(banked=False, refusal=refusal)
        schema.check(record, str(store_path))
        _create_once(store_path, record.canonical_json())
        pruned_path = self._pruned_path(record)
        if pruned_path is not None:
            pruned = record.pruned()
            schema.check(pruned, str(pruned_path))
            _create_once(pruned_path, pruned.canonical_json())
        return Banking(banked=True, store_path=store_path, pruned_path=pruned_path)

    def _pruned_path(self, record: RunRecord) -> Path | None:
        folders = sorted(self.records_root.glob(f"*/scenarios/{record.scenario_id}"))
        folders = [folder for folder in folders if folder.is_dir()]
        if len(folders) != 1:
            return None
        return folders[0] / "records" / f"{record.run_id}.json"


def read_agent_transcript(ref: str, base: Path) -> AgentTranscript:
    """Read the agent-transcript.v1 file at `ref` (relative refs resolve against `base`).

    Raises `ContractError` naming the file when it is missing or invalid.
    """
    path = Path(ref) if Path(ref).is_absolute() else base / ref
    try:
        return AgentTranscript.model_validate_json(path.read_bytes())
    except OSError as error:
        raise ContractError(f"{path}: cannot read agent transcript: {error}") from None
    except ValidationError as error:
        raise ContractError.from_validation(error, str(path)) from None


def _copy_kept(source: Path, name: str, into: Path) -> str | None:
    """Copy `source/name` to `into/name`; None when copied, else why not."""
    relative = PurePosixPath(name)
    if relative.is_absolute() or not relative.parts or {"..", "."} & set(relative.parts):
        return "not a plain relative path"
    if "\\" in name or "\x00" in name:
        return "not a plain relative path"
    try:  # no link followed at any component, nothing but a regular file, capped
        data = read_untrusted(source, relative, cap=MAX_AGENT_FILE_BYTES)
    except UntrustedFileRefused as refused:
        return refused.reason
    target = into.joinpath(*relative.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        return f"cannot copy it: {error.strerror or error}"
    return None


def _event_line(logged: LoggedEvent) -> str:
    body = {
        "seq": logged.seq,
        "subject": logged.subject,
        "event": logged.event.model_dump(mode="json"),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"


def _parse_line(line: str, where: str) -> LoggedEvent:
    try:
        body = json.loads(line)
        event = parse_event(json.dumps(body["event"]))
        return LoggedEvent(seq=int(body["seq"]), subject=str(body["subject"]), event=event)
    except (ValueError, KeyError, TypeError) as error:
        raise EventLogError(f"{where}: not a logged event: {error}") from None


def _dotted(path: Any) -> str:
    return ".".join(str(part) for part in path)


def _write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step (a reader sees the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _write_synced(temporary, text)
    os.replace(temporary, path)


def _create_once(path: Path, text: str) -> bool:
    """Create `path` holding `text` atomically unless it exists; True if this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _write_synced(temporary, text)
    try:
        os.link(temporary, path)  # fails if `path` exists: never overwrites
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)
    return True


def _write_synced(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
