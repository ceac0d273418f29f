"""The agent's transcript as a timeline: tool calls, their output, model calls. Pure.

`raw_json` (`sreforge-stream.v1`) holds the stamped stdout/stderr lines and the model-call
log's rows (`model_calls.rows`, counted by the harness's proxy or rein). A line that is
JSON in a known agent shape (Claude Code's stream-json, Codex's items, OpenAI-style tool
calls) becomes a tool call or a message; any other line is output, grouped with its
neighbours so the timeline stays readable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue

__all__ = ["Entry", "Usage", "timeline", "usage_of"]

_MAX_TEXT = 2000
_MAX_ENTRIES = 600


@dataclass(frozen=True)
class Entry:
    """One step of the agent's session: when, what kind, what it said (plain text)."""

    at: datetime | None
    kind: str
    text: str
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class Usage:
    """The session's model calls as the harness counted them."""

    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    models: tuple[str, ...]


def usage_of(raw: JsonValue) -> Usage | None:
    """The model-call totals of a transcript's `raw_json`, or None when nothing was counted."""
    calls = raw.get("model_calls") if isinstance(raw, dict) else None
    if not isinstance(calls, dict):
        return None
    cost = calls.get("cost_usd")
    models = calls.get("models")
    return Usage(
        calls=_int(calls.get("calls")),
        tokens_in=_int(calls.get("tokens_in")),
        tokens_out=_int(calls.get("tokens_out")),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
        models=tuple(str(m) for m in models) if isinstance(models, list) else (),
    )


def timeline(raw: JsonValue) -> list[Entry]:
    """Every step of the session in time order (capped at a few hundred entries)."""
    if not isinstance(raw, dict):
        return [Entry(None, "output", _cut(str(raw)))] if raw else []
    entries = list(_stream(raw.get("lines")))
    calls = raw.get("model_calls")
    if isinstance(calls, dict):
        entries += _model_calls(calls.get("rows"))
    entries.sort(key=lambda e: (e.at is None, e.at or datetime.min))
    if len(entries) > _MAX_ENTRIES:
        half = _MAX_ENTRIES // 2
        gap = Entry(None, "…", f"{len(entries) - 2 * half} entries left out")
        entries = [*entries[:half], gap, *entries[-half:]]
    return entries


def _stream(lines: JsonValue) -> Iterable[Entry]:
    pending: list[str] = []
    started: datetime | None = None
    for line in lines if isinstance(lines, list) else ():
        if not isinstance(line, dict) or "text" not in line:
            if isinstance(line, dict) and "truncated" in line:
                yield Entry(None, "…", f"{line['truncated']} lines left out")
            continue
        at = _time(line.get("t"))
        steps = list(_steps(str(line["text"]), at))
        if steps:
            if pending:
                yield Entry(started, "output", _cut("\n".join(pending)))
                pending = []
            yield from steps
            continue
        if not pending:
            started = at
        prefix = "stderr: " if line.get("stream") == "stderr" else ""
        pending.append(prefix + str(line["text"]).rstrip("\n"))
    if pending:
        yield Entry(started, "output", _cut("\n".join(pending)))


def _steps(text: str, at: datetime | None) -> Iterable[Entry]:
    """The structured steps in one line of agent output (none when it is plain text)."""
    try:
        data = json.loads(text)
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # Claude Code stream-json (assistant / user turns)
        for block in content:
            if isinstance(block, dict):
                yield from _block(block, at)
        return
    item = data.get("item")
    if isinstance(item, dict) and data.get("type") == "item.completed":  # Codex --json
        yield from _codex(item, at)
        return
    for call in data.get("tool_calls") or ():  # OpenAI-style
        function = call.get("function", {}) if isinstance(call, dict) else {}
        yield Entry(at, "tool call", _cut(f"{function.get('name')}({function.get('arguments')})"))
    if data.get("type") == "result" and isinstance(data.get("result"), str):
        yield Entry(at, "result", _cut(data["result"]), cost_usd=_float(data.get("total_cost_usd")))


def _block(block: dict[str, Any], at: datetime | None) -> Iterable[Entry]:
    kind = block.get("type")
    if kind == "tool_use":
        yield Entry(at, "tool call", _cut(f"{block.get('name')} {_compact(block.get('input'))}"))
    elif kind == "tool_result":
        yield Entry(at, "tool output", _cut(_flatten(block.get("content"))))
    elif kind == "text" and str(block.get("text", "")).strip():
        yield Entry(at, "message", _cut(str(block["text"])))


def _codex(item: dict[str, Any], at: datetime | None) -> Iterable[Entry]:
    kind = item.get("type")
    if kind == "command_execution":
        yield Entry(at, "tool call", _cut(str(item.get("command"))))
        if item.get("aggregated_output"):
            yield Entry(at, "tool output", _cut(str(item["aggregated_output"])))
    elif kind in {"agent_message", "reasoning"} and item.get("text"):
        yield Entry(at, "message", _cut(str(item["text"])))
    elif kind == "file_change":
        yield Entry(at, "tool call", _cut(f"edit {_compact(item.get('changes'))}"))


def _model_calls(rows: JsonValue) -> Iterable[Entry]:
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, dict):
            continue
        if "truncated" in row:
            yield Entry(None, "…", f"{row['truncated']} model calls left out")
            continue
        tokens_in, tokens_out = _int(row.get("tokens_in")), _int(row.get("tokens_out"))
        latency = _float(row.get("latency_s"))
        text = f"{row.get('model') or 'model'} · {tokens_in} in / {tokens_out} out"
        text += f" · {latency:.2f}s" if latency is not None else ""
        text += f" · HTTP {row['status']}" if row.get("status") not in (None, 200) else ""
        yield Entry(
            _time(row.get("t")), "model call", text,
            tokens=tokens_in + tokens_out, cost_usd=_float(row.get("cost_usd")),
        )  # fmt: skip


def _time(value: JsonValue) -> datetime | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _flatten(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(_flatten(part) for part in content)
    if isinstance(content, dict):
        return str(content.get("text", _compact(content)))
    return str(content)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:_MAX_TEXT] if value is not None else ""


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + f"… ({len(text)} chars)"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
