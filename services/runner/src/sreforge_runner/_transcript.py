"""`agent-transcript.json` for a CLI agent's session: header plus the stamped stream.

The header (agent-transcript.v1) names the harness, model, session id and the
confinement actually achieved. `raw_json` holds the stamped stdout/stderr lines
(`stream.jsonl`), capped head + tail with a marker, every known secret value
replaced (`[REDACTED:<NAME>]`), and completeness flags. `model_calls` summarises
the model-call log (`model-calls.jsonl`, written by the model proxy or the
`openai` rein): calls, tokens in/out, estimated cost, latency, and one compact
row per call; `model_usage` gives the same summary, without the rows, for the
evidence. The logs are the runner's own (the agent folder's top is bound into no
sandbox), read through `sreforge_confine.read_untrusted` all the same: no link
followed, only a regular file, capped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from sreforge_confine import UntrustedFileRefused, read_untrusted
from sreforge_contracts import AgentTranscript, Confinement, SandboxKind

from sreforge_runner._errors import ProfileError
from sreforge_runner._pricing import Price, price_of, tokens_of

__all__ = [
    "MODEL_CALLS_LOG",
    "TRANSCRIPT_FILE",
    "model_usage",
    "redact",
    "route_secrets",
    "scrub_file",
    "write_transcript",
]

TRANSCRIPT_FILE = "agent-transcript.json"
MODEL_CALLS_LOG = "model-calls.jsonl"
"""The model-call log in the agent dir (the proxy's or the `openai` rein's)."""
_MAX_LINES = 5000
# The record's confinement label for each sandbox kind: a remote machine over ssh is the
# agent's own box (`in-box`); the evidence keeps the sandbox kind itself (`remote`).
_LABELS: dict[SandboxKind, Confinement] = {
    "host-open": "host-open",
    "host-sandboxed": "host-sandboxed",
    "remote": "in-box",
    "in-box": "in-box",
}
_MAX_CALL_ROWS = 2000
_MAX_MODELS = 10
_MAX_NAME = 80
_MIN_SECRET = 6
_ROW_KEYS = ("call", "t", "method", "path", "model", "status", "latency_s")
_MAX_LOG_BYTES = 64_000_000  # over every kept log's cap (`KEPT_LOGS`)


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
    text = _read_log(path) if secrets else None
    if text is None:
        return 0
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
    provider: str | None = None,
    profile_metadata: Mapping[str, str] | None = None,
    files: Sequence[Mapping[str, JsonValue]] = (),
) -> Path | None:
    """Write `<root>/agent-transcript.json` from `<root>/stream.jsonl`; None if unlabelled.
    `profile_metadata` may carry the price override (`price_in/out_per_mtok`); `files`
    lists the kept files (paths relative to the run's folder, sizes, cuts, redactions)."""
    label = _LABELS.get(confinement) if confinement else None
    if label is None:
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
        "redactions": redactions + sum(_count(entry.get("redactions")) for entry in files),
        "native_files": list(native_files),
        "files": [dict(entry) for entry in files],
    }
    calls = _model_calls(root / MODEL_CALLS_LOG, profile_metadata or {}, rows=True)
    if calls is not None:
        raw["model_calls"] = calls
        completeness = raw["completeness"]
        assert isinstance(completeness, dict)
        completeness["proxy_calls"] = calls["calls"]
    transcript = AgentTranscript(
        run_id=run_id,
        harness=harness,
        session=session,
        confinement=label,
        captured_at=datetime.now(UTC),
        model=model,
        provider=provider,
        submitted=submitted,
        raw_json=raw,
    )
    path = root / TRANSCRIPT_FILE
    path.write_text(transcript.model_dump_json(indent=1))
    return path


def _read_log(path: Path) -> str | None:
    """The text of a log in the agent folder; None when absent or not a plain file."""
    try:
        return read_untrusted(path.parent, path.name, cap=_MAX_LOG_BYTES).decode(errors="replace")
    except UntrustedFileRefused:
        return None


def _lines(path: Path, secrets: Mapping[str, str]) -> tuple[list[JsonValue], int, int]:
    text = _read_log(path)
    if text is None:
        return [], 0, 0
    lines: list[JsonValue] = []
    redactions = unreadable = 0
    for raw in text.splitlines():
        clean, count = redact(raw, secrets)
        redactions += count
        try:
            lines.append(json.loads(clean))
        except ValueError:
            unreadable += 1
    return lines, redactions, unreadable


def model_usage(root: Path, profile_metadata: Mapping[str, str]) -> dict[str, JsonValue] | None:
    """Calls, tokens in/out, estimated cost and latency of `<root>/model-calls.jsonl`
    (None without a log). Safe to publish: numbers and (capped) model names only."""
    return _model_calls(root / MODEL_CALLS_LOG, profile_metadata, rows=False)


def _model_calls(
    path: Path, profile_metadata: Mapping[str, str], *, rows: bool
) -> dict[str, JsonValue] | None:
    """The model-call log summed up; `rows` adds one compact row per call (capped)."""
    text = _read_log(path)
    if text is None:
        return None
    lines = text.splitlines()
    entries = [entry for entry in map(_entry, lines) if entry is not None]
    tally = _Tally()
    for entry in entries:
        tally.add(entry, profile_metadata)
    summary = tally.summary()
    if rows:
        summary["log"] = path.name
        summary["rows"] = _rows(entries, profile_metadata)
    return summary


@dataclass
class _Tally:
    """Running totals over the model-call log."""

    calls: int = 0
    totals: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    without_usage: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    price_sources: set[str] = field(default_factory=set)
    unpriced: set[str] = field(default_factory=set)

    def add(self, entry: dict[str, Any], profile_metadata: Mapping[str, str]) -> None:
        """Count one logged call."""
        self.calls += 1
        model = _name(entry.get("model"))
        self.models.add(model or "unnamed")
        self.errors += _status(entry) >= 400
        latency = entry.get("latency_s")
        if isinstance(latency, float | int):
            self.latencies.append(float(latency))
        usage = entry.get("usage")
        for key, value in usage.items() if isinstance(usage, dict) else ():
            if isinstance(value, int) and not isinstance(value, bool):
                self.totals[key] = self.totals.get(key, 0) + value
        counted = tokens_of(usage)
        if counted is None:
            self.without_usage += 1
            return
        self.tokens_in += counted[0]
        self.tokens_out += counted[1]
        try:
            price = price_of(model, profile_metadata)
        except ProfileError:  # a bad override was refused at session start; never guess here
            self.unpriced.add("invalid price override")
            return
        if price is None:
            self.unpriced.add(model or "unnamed")
        else:
            self.price_sources.add(price.source)
            self.cost_usd += price.cost_usd(*counted)

    def summary(self) -> dict[str, JsonValue]:
        """The totals as JSON; the cost is None when any call's model has no price."""
        return {
            "calls": self.calls,
            **self.totals,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": None if self.unpriced else round(self.cost_usd, 6),
            "price_sources": _listed(self.price_sources),
            "unpriced_models": _listed(self.unpriced),
            "models": _listed(self.models),
            "calls_without_usage": self.without_usage,
            "error_calls": self.errors,
            "latency_s_total": round(sum(self.latencies), 4),
            "latency_s_max": round(max(self.latencies, default=0.0), 4),
        }


def _rows(entries: list[dict[str, Any]], profile_metadata: Mapping[str, str]) -> list[JsonValue]:
    rows: list[JsonValue] = []
    for entry in entries:
        row: dict[str, JsonValue] = {key: entry.get(key) for key in _ROW_KEYS if key in entry}
        row["model"] = _name(entry.get("model"))
        counted = tokens_of(entry.get("usage"))
        price = _row_price(_name(entry.get("model")), profile_metadata) if counted else None
        row["tokens_in"], row["tokens_out"] = counted if counted else (None, None)
        row["cost_usd"] = round(price.cost_usd(*counted), 6) if price and counted else None
        rows.append(row)
    if len(rows) <= _MAX_CALL_ROWS:
        return rows
    half = _MAX_CALL_ROWS // 2
    marker: JsonValue = {"truncated": len(rows) - 2 * half}
    return [*rows[:half], marker, *rows[-half:]]


def _row_price(model: str | None, profile_metadata: Mapping[str, str]) -> Price | None:
    try:
        return price_of(model, profile_metadata)
    except ProfileError:
        return None


def _entry(line: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _name(model: object) -> str | None:
    """A model name as logged (it comes from the agent's request): a capped string."""
    return model[:_MAX_NAME] if isinstance(model, str) and model else None


def _listed(names: set[str]) -> list[JsonValue]:
    return [name for name in sorted(names)[:_MAX_MODELS]]


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _status(entry: dict[str, Any]) -> int:
    status = entry.get("status")
    return status if isinstance(status, int) else 0


def _head_tail(lines: list[JsonValue]) -> list[JsonValue]:
    half = _MAX_LINES // 2
    dropped = len(lines) - 2 * half
    marker: JsonValue = {"truncated": dropped}
    return [*lines[:half], marker, *lines[-half:]]


def _flag(line: JsonValue, key: str) -> JsonValue:
    return line.get(key) if isinstance(line, dict) else None
