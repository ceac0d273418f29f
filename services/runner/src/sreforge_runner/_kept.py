"""The agent folder's kept files: capped, redacted, listed for the recorder.

What stays of a session in `<run_dir>/agent/` (the output log, the stamped
stream, the model-call log, the native session files, the transcript) is
sealed at the session's end: every known secret value replaced, and a file past
its cap cut to its head and tail at line boundaries with a marker saying how
much was cut. The recorder copies what `kept_files` lists into
`runs/<run_id>/agent/` before the stack's cleanup removes the folder.

Every source is opened through `sreforge_confine.open_untrusted` (no link followed at
any component, nothing but a regular file): native session files come from the agent's
HOME, and a refused one is logged and left out.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import JsonValue
from sreforge_confine import (
    UntrustedFileMissing,
    UntrustedFileRefused,
    is_untrusted_file,
    open_untrusted,
)
from sreforge_contracts import AGENT_DIR, MAX_STDERR_LINES, AgentExit, TimeoutKind

from sreforge_runner._transcript import MODEL_CALLS_LOG, TRANSCRIPT_FILE, redact

__all__ = [
    "KEPT_LOGS",
    "NATIVE_DIR",
    "KeptFile",
    "agent_exit",
    "keep_file",
    "kept_files",
    "seal_logs",
]

KEPT_LOGS: dict[str, int] = {
    "output.log": 8_000_000,
    "stream.jsonl": 8_000_000,
    MODEL_CALLS_LOG: 32_000_000,
}
"""The agent folder's logs and each one's cap in bytes."""
_SLACK = 4096  # under the cap: the marker, and redactions that lengthen a line
NATIVE_DIR = "native"
"""The agent folder's copy of the native session files."""
_MAX_NATIVE_FILES = 200
_MAX_NAME = 300  # native names come from the agent's HOME: they must fit on the bus
log = structlog.get_logger("sreforge.runner")


@dataclass(frozen=True)
class KeptFile:
    """One kept file: its path in the agent folder, size kept, bytes cut, redactions."""

    name: str
    size: int
    truncated_bytes: int = 0
    redactions: int = 0

    def as_json(self) -> dict[str, JsonValue]:
        """The transcript's entry: the path relative to the run's folder."""
        return {
            "path": f"{AGENT_DIR}/{self.name}",
            "bytes": self.size,
            "truncated_bytes": self.truncated_bytes,
            "redactions": self.redactions,
        }


def keep_file(
    source: Path,
    target: Path,
    *,
    cap: int,
    secrets: Mapping[str, str],
    name: str,
    root: Path | None = None,
) -> KeptFile:
    """Write `source` to `target` (the same path: in place) capped and redacted.

    `source` is read through no link below `root` (default: its own folder), and only
    if it is a regular file; else `UntrustedFileRefused`. Sealing again changes nothing:
    the cut leaves room under `cap` for its marker and for redactions that lengthen the
    text. Redaction goes line by line, so a large file costs its kept bytes in memory, once.
    """
    base = root or source.parent
    with open_untrusted(base, source.relative_to(base).as_posix()) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= cap:
            data, cut = handle.read(cap), 0
        else:
            half = max(cap // 2 - _SLACK, 1)
            head = handle.read(half)
            handle.seek(size - half)
            tail = handle.read(half)
            head = head[: head.rfind(b"\n") + 1] or head
            tail = tail[tail.find(b"\n") + 1 :] or tail
            cut = size - len(head) - len(tail)
            data = head + _marker(name, cut) + tail
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.kept")
    redactions = 0
    with temporary.open("w", encoding="utf-8") as out:
        for line in io.BytesIO(data):
            text, count = redact(line.decode(errors="replace"), secrets)
            out.write(text)
            redactions += count
    os.replace(temporary, target)
    return KeptFile(name, target.stat().st_size, cut, redactions)


def _marker(name: str, cut: int) -> bytes:
    if name.endswith(".jsonl"):
        return json.dumps({"truncated_bytes": cut}).encode() + b"\n"
    return f"\n[... {cut} bytes cut by the harness ...]\n".encode()


def seal_logs(root: Path, secrets: Mapping[str, str]) -> list[KeptFile]:
    """Cap and redact the agent folder's logs in place; the ones that exist."""
    sealed = []
    for name, cap in KEPT_LOGS.items():
        path = root / name
        try:
            sealed.append(keep_file(path, path, cap=cap, secrets=secrets, name=name))
        except UntrustedFileMissing:
            continue
        except UntrustedFileRefused as refused:
            log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
    return sealed


def kept_files(root: Path) -> tuple[str, ...]:
    """What the recorder is to copy: the logs, the transcript and the native files
    that exist in `root`, relative to it (POSIX paths)."""
    names = [name for name in (*KEPT_LOGS, TRANSCRIPT_FILE) if is_untrusted_file(root, name)]
    native = root / NATIVE_DIR
    if native.is_dir():
        found = sorted(path.relative_to(root).as_posix() for path in native.rglob("*"))
        short = [name for name in found if len(name) <= _MAX_NAME and is_untrusted_file(root, name)]
        names += short[:_MAX_NATIVE_FILES]
    return tuple(names)


def agent_exit(stream: Path, exit_code: int | None, timeout: TimeoutKind | None) -> AgentExit:
    """How the session ended, with the last stderr lines of the stamped stream."""
    lines, count = _stderr(stream)
    return AgentExit(
        exit_code=exit_code,
        timeout=timeout,
        stderr_tail=tuple(AgentExit.clip(line) for line in lines[-MAX_STDERR_LINES:]),
        stderr_lines=count,
    )


def _stderr(stream: Path) -> tuple[list[str], int]:
    """The stderr lines of the stream's last part, and how many the whole stream has."""
    try:
        handle = open_untrusted(stream.parent, stream.name)
    except UntrustedFileRefused:
        return [], 0
    lines: list[str] = []
    count = 0
    with handle:
        for raw in handle:
            if b'"stderr"' not in raw:
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("stream") == "stderr":
                count += 1
                lines.append(str(entry.get("text", "")))
                del lines[:-MAX_STDERR_LINES]
    return lines, count
