"""The live dashboard: a loopback FastAPI app over the recorder's run folders.

The recorder appends every event of a run to `runs/<run_id>/events.jsonl` as it arrives
and writes `record.json` at the end, so the folders are the live state: `/events` (SSE)
streams every run's events as they are appended, then a `RecordWritten` line when the
record lands; `/runs/<id>/events` does the same for one run. Every route wants the
operator's token (`?token=` — an EventSource cannot send headers — or a bearer header).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from sreforge_contracts import check_run_id

from sreforge_report._dashboard_page import dashboard_page
from sreforge_report._live import BusFeed, bus_stream, sli_stream
from sreforge_report._load import ReportError, load_run
from sreforge_report._run_page import render_run

__all__ = ["create_dashboard", "dashboard_token"]

_POLL_S = 0.25
_HEARTBEAT_S = 10.0
_MAX_RUNS = 50
_PHASES = {"RunRequested": "requested", "StackReady": "stack ready", "FaultArmed": "armed",
           "RunTriggered": "triggered", "BriefReady": "agent working", "Submitted": "submitted",
           "CiResult": "ci", "Deployed": "grading", "Scored": "scored", "Recorded": "recorded",
           "CleanedUp": "cleaned up", "RunFailed": "failed", "RunRejected": "rejected",
           "RecordWritten": "recorded"}  # fmt: skip


@dataclass
class _Cursor:
    """How far one run's folder has been streamed."""

    offset: int = 0
    recorded: bool = False
    context: dict[str, str] = field(default_factory=dict)


def dashboard_token(operator_password: str) -> str:
    """The operator's dashboard token: an HMAC of its bus password (so it is the
    operator's without being the bus password itself)."""
    digest = hmac.new(operator_password.encode(), b"sreforge-dashboard", hashlib.sha256)
    return digest.hexdigest()[:32]


def create_dashboard(runs: Path, token: str, feed: BusFeed | None = None) -> FastAPI:
    """The dashboard app over `runs` (the recorder's runs dir), guarded by `token`; with
    `feed` it also streams the whole bus and the SLI of runs in grading."""
    if not token:
        raise ValueError("the dashboard needs the operator's token")
    app = FastAPI(title="SREForge dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    expected = token.encode()

    def authorized(
        token: Annotated[str | None, Query()] = None,
        authorization: Annotated[str | None, Header()] = None,
    ) -> None:
        given = token or (authorization or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), expected):
            raise HTTPException(401, "the dashboard wants the operator's token")

    guarded = [Depends(authorized)]

    @app.get("/", response_class=HTMLResponse, dependencies=guarded)
    async def index() -> str:
        return dashboard_page(live=feed is not None)

    @app.get("/runs/{run_id}", response_class=HTMLResponse, dependencies=guarded)
    async def run_page(run_id: str) -> str:
        return dashboard_page(_checked(run_id), live=feed is not None)

    @app.get("/runs/{run_id}/report", response_class=HTMLResponse, dependencies=guarded)
    async def report(run_id: str) -> str:
        try:
            return render_run(load_run(runs / _checked(run_id)))
        except ReportError as error:
            raise HTTPException(404, str(error)) from None

    @app.get("/events", dependencies=guarded)
    async def events(request: Request) -> StreamingResponse:
        return _sse(request, runs, None)

    @app.get("/runs/{run_id}/events", dependencies=guarded)
    async def run_events(request: Request, run_id: str) -> StreamingResponse:
        return _sse(request, runs, _checked(run_id))

    @app.get("/bus", dependencies=guarded)
    async def bus(request: Request) -> StreamingResponse:
        if feed is None:
            raise HTTPException(404, "the whole-bus stream is served by the recorder")
        return bus_stream(request, feed)

    @app.get("/runs/{run_id}/sli", dependencies=guarded)
    async def sli(request: Request, run_id: str) -> StreamingResponse:
        if feed is None:
            raise HTTPException(404, "the live SLI is served by the recorder")
        return sli_stream(request, feed, _checked(run_id))

    return app


def _checked(run_id: str) -> str:
    try:
        return check_run_id(run_id)
    except Exception:
        raise HTTPException(404, "not a run id") from None


def _sse(request: Request, runs: Path, only: str | None) -> StreamingResponse:
    async def stream() -> AsyncIterator[str]:
        cursors: dict[str, _Cursor] = {}
        quiet = 0.0
        while not await request.is_disconnected():
            sent = False
            for folder in _folders(runs, only):
                cursor = cursors.setdefault(folder.name, _Cursor())
                for item in _advance(folder, cursor):
                    sent = True
                    yield f"data: {json.dumps(item)}\n\n"
            quiet = 0.0 if sent else quiet + _POLL_S
            if quiet >= _HEARTBEAT_S:
                quiet = 0.0
                yield ": still here\n\n"
            await asyncio.sleep(_POLL_S)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _folders(runs: Path, only: str | None) -> list[Path]:
    if only is not None:
        return [runs / only] if (runs / only).is_dir() else []
    found = [p for p in runs.glob("*/events.jsonl")]
    return sorted(p.parent for p in found)[-_MAX_RUNS:]


def _advance(folder: Path, cursor: _Cursor) -> list[dict[str, Any]]:
    """The folder's new events since `cursor` (complete lines only), then the record."""
    items: list[dict[str, Any]] = []
    try:
        with (folder / "events.jsonl").open("rb") as log:
            log.seek(cursor.offset)
            chunk = log.read()
    except FileNotFoundError:
        chunk = b""
    complete = chunk[: chunk.rfind(b"\n") + 1]
    cursor.offset += len(complete)
    for line in complete.splitlines():
        try:
            event = json.loads(line)["event"]
        except (ValueError, KeyError, TypeError):
            continue
        items.append(_item(folder.name, event, cursor))
    if not cursor.recorded and (folder / "record.json").is_file():
        try:
            record = load_run(folder).record
        except ReportError:
            return items  # being written; next poll
        cursor.recorded = True
        finished = record.finished_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        items.append({
            "run_id": folder.name, "type": "RecordWritten", "phase": "recorded",
            "at": finished, "verdict": record.verdict,
            "summary": f"record.json: {record.verdict}", **cursor.context,
        })  # fmt: skip
    return items


def _item(run_id: str, event: dict[str, Any], cursor: _Cursor) -> dict[str, Any]:
    kind = str(event.get("type", "?"))
    if kind == "RunRequested":
        cursor.context = {"scenario": str(event.get("scenario")), "agent": str(event.get("agent"))}
    verdict = event.get("verdict") if kind in {"Scored", "RunFailed", "Recorded"} else None
    summary = f"verdict {verdict}" if verdict else ""
    if kind == "RunFailed":
        summary += f" at {event.get('stage')}: {event.get('reason')}"
    return {"run_id": run_id, "type": kind, "phase": _PHASES.get(kind, kind),
            "at": str(event.get("occurred_at", "")), "verdict": verdict,
            "summary": summary.strip(), **cursor.context}  # fmt: skip
