"""`agent-transcript.json` for a CLI agent's session: header plus the stamped stream.

The header (agent-transcript.v1) names the harness, model, session id and the
confinement actually achieved. `raw_json` holds the stamped stdout/stderr lines
(`stream.jsonl`), capped head + tail with a marker, every known secret value
replaced (`[REDACTED:<NAME>]`), and completeness flags. Native session files and
the model proxy's log are later layers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import JsonValue
from sreforge_contracts import AgentTranscript, SandboxKind

__all__ = ["TRANSCRIPT_FILE", "redact", "route_secrets", "scrub_file", "write_transcript"]

TRANSCRIPT_FILE = "agent-transcript.json"
_MAX_LINES = 5000
_MIN_SECRET = 6


def redact(text: str, secrets: Mapping[str, str]) -> tuple[str, int]:
    """`text` with every secret value replaced by `[REDACTED:<NAME>]`, and the count."""
    count = 0
    for name, value in secrets.items():
        if len(value) >= _MIN_SECRET and value in text:
            count += text.count(value)
            text = text.replace(value, f"[REDACTED:{name}]")
    return text, count


def route_secrets(routes: tuple[str, ...]) -> dict[str, str]:
    """The values of the named credential routes present in the runner's env."""
    return {name: os.environ[name] for name in routes if os.environ.get(name)}


def scrub_file(path: Path, secrets: Mapping[str, str]) -> int:
    """Replace every secret value in the file at `path`; return how many were replaced."""
    if not secrets or not path.is_file():
        return 0
    text = path.read_text(errors="replace")
    clean, count = redact(text, secrets)
    if count:
        path.write_text(clean)
    return count


def write_transcript(
    root: Path,
    *,
    run_id: str,
    harness: str,
    model: str | None,
    session: str,
    confinement: SandboxKind | None,
    submitted: bool,
    secrets: Mapping[str, str],
    native_files: tuple[str, ...] = (),
) -> Path | None:
    """Write `<root>/agent-transcript.json` from `<root>/stream.jsonl`; None if unlabelled."""
    if confinement not in ("host-open", "host-sandboxed"):
        return None  # the v1 header has no label for it; an unlabelled record is not banked
    lines, redactions, unreadable = _lines(root / "stream.jsonl", secrets)
    kept = lines if len(lines) <= _MAX_LINES else _head_tail(lines)
    raw: dict[str, JsonValue] = {
        "format": "sreforge-stream.v1",
        "lines": kept,
        "completeness": {
            "stream_lines": len(lines),
            "truncated_lines": len(lines) - len(kept) + 1 if kept is not lines else 0,
            "unreadable_lines": unreadable,
            "partial_last_line": bool(lines) and bool(_flag(lines[-1], "partial")),
            "session_file_found": bool(native_files),
            "proxy_calls": None,
        },
        "redactions": redactions,
        "native_files": list(native_files),
    }
    calls = _model_calls(root / "model-calls.jsonl")
    if calls is not None:
        raw["model_calls"] = calls
        completeness = raw["completeness"]
        assert isinstance(completeness, dict)
        completeness["proxy_calls"] = calls["calls"]
    transcript = AgentTranscript(
        run_id=run_id,
        harness=harness,
        session=session,
        confinement=confinement,
        captured_at=datetime.now(UTC),
        model=model,
        submitted=submitted,
        raw_json=raw,
    )
    path = root / TRANSCRIPT_FILE
    path.write_text(transcript.model_dump_json(indent=1))
    return path


def _lines(path: Path, secrets: Mapping[str, str]) -> tuple[list[JsonValue], int, int]:
    if not path.is_file():
        return [], 0, 0
    lines: list[JsonValue] = []
    redactions = unreadable = 0
    for raw in path.read_text(errors="replace").splitlines():
        clean, count = redact(raw, secrets)
        redactions += count
        try:
            lines.append(json.loads(clean))
        except ValueError:
            unreadable += 1
    return lines, redactions, unreadable


def _model_calls(path: Path) -> dict[str, JsonValue] | None:
    """Call count and token totals from the model-call log, when there is one."""
    if not path.is_file():
        return None
    calls = 0
    totals: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        try:
            usage = json.loads(line).get("usage") or {}
        except (ValueError, AttributeError):
            continue
        calls += 1
        if isinstance(usage, dict):
            for key, value in usage.items():
                if isinstance(value, int):
                    totals[key] = totals.get(key, 0) + value
    return {"calls": calls, **totals}


def _head_tail(lines: list[JsonValue]) -> list[JsonValue]:
    half = _MAX_LINES // 2
    dropped = len(lines) - 2 * half
    marker: JsonValue = {"truncated": dropped}
    return [*lines[:half], marker, *lines[-half:]]


def _flag(line: JsonValue, key: str) -> JsonValue:
    return line.get(key) if isinstance(line, dict) else None
