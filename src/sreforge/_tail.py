"""One readable line per bus event, for `sreforge tail`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sreforge_contracts import ContractError, check_message

__all__ = ["format_event_json", "format_event_line"]

_ENVELOPE = {"event_id", "type", "run_id", "occurred_at", "producer", "contract_version"}
_MAX_SUMMARY = 160


def format_event_line(subject: str, data: bytes, received_at: datetime) -> str:
    """Render a bus message as `time run type summary`; unparsable bodies are shown raw."""
    stamp = received_at.strftime("%H:%M:%S.%f")[:-3]
    body = _decode(data)
    if body is None:
        raw = data[:_MAX_SUMMARY].decode("utf-8", errors="replace")
        return f"{stamp}  {'-':<24} {'(unparsed)':<16} {subject}  {raw}"
    kind = str(body.get("type") or subject.rsplit(".", 1)[-1])
    run = str(body.get("run_id") or "-")
    return f"{stamp}  {run:<24} {kind:<16} {_summary(body)}".rstrip()


def format_event_json(subject: str, data: bytes, seq: int) -> str:
    """Render a bus message as one JSON line carrying its subject and stream sequence."""
    body = _decode(data)
    payload: dict[str, Any] = {"subject": subject, "seq": seq}
    payload["event" if body is not None else "raw"] = (
        body if body is not None else data.decode("utf-8", errors="replace")
    )
    return json.dumps(payload, default=str, separators=(",", ":"))


def _decode(data: bytes) -> dict[str, Any] | None:
    try:
        check_message(data, "event")  # json.loads recurses: a too-deep body is shown raw
        body = json.loads(data)
    except (ContractError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _summary(body: dict[str, Any]) -> str:
    parts = []
    for key, value in body.items():
        if key in _ENVELOPE or value in (None, "", [], {}):
            continue
        text = json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
        parts.append(f"{key}={text}")
    summary = " ".join(parts)
    return summary if len(summary) <= _MAX_SUMMARY else summary[: _MAX_SUMMARY - 1] + "…"
