"""The dashboard's live feeds beyond the run folders: the whole bus and a run's SLI.

A `BusFeed` is what the recorder (which is on the bus) hands the dashboard: `watch()`
yields every message on the bus as a small dict (subject, type, run, time, summary), and
`sli(run_id)` reads the grading samples the oracle has saved so far. `sse` frames items.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import StreamingResponse

__all__ = ["POLL_S", "BusFeed", "bus_stream", "sli_stream", "sse"]

POLL_S = 0.5
_HEARTBEAT_S = 10.0
_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class BusFeed(Protocol):
    """The bus as the dashboard sees it (the recorder implements it)."""

    def watch(self) -> AsyncIterator[dict[str, Any]]:
        """Every message on the bus from now on, one dict each."""
        ...

    async def sli(self, run_id: str) -> list[dict[str, Any]]:
        """The grading samples of `run_id` saved so far, in order (empty before grading)."""
        ...


def sse(items: AsyncIterator[str]) -> StreamingResponse:
    """A server-sent-events response over already framed `items`."""
    return StreamingResponse(items, media_type="text/event-stream", headers=_HEADERS)


def frame(item: dict[str, Any]) -> str:
    """One SSE `data:` frame."""
    return f"data: {json.dumps(item)}\n\n"


def bus_stream(request: Request, feed: BusFeed) -> StreamingResponse:
    """Every bus message as it is published, with a heartbeat while the bus is quiet."""

    async def stream() -> AsyncIterator[str]:
        watching = feed.watch()
        try:
            while not await request.is_disconnected():
                try:
                    item = await asyncio.wait_for(anext(watching), _HEARTBEAT_S)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                except StopAsyncIteration:
                    return
                yield frame(item)
        finally:
            await watching.aclose()  # type: ignore[attr-defined]

    return sse(stream())


def sli_stream(request: Request, feed: BusFeed, run_id: str) -> StreamingResponse:
    """The run's grading samples: those saved so far, then each new one as it is saved."""

    async def stream() -> AsyncIterator[str]:
        sent = 0
        quiet = 0.0
        while not await request.is_disconnected():
            samples = await feed.sli(run_id)
            for sample in samples[sent:]:
                yield frame({"run_id": run_id, **sample})
            quiet = 0.0 if len(samples) > sent else quiet + POLL_S
            sent = max(sent, len(samples))
            if quiet >= _HEARTBEAT_S:
                quiet = 0.0
                yield ": still here\n\n"
            await asyncio.sleep(POLL_S)

    return sse(stream())
