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

__all__ = ["HEARTBEAT_S", "POLL_S", "BusFeed", "bus_stream", "frame", "sli_stream", "sse"]

POLL_S = 0.5
HEARTBEAT_S = 10.0
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
    """Every bus message as it is published, with a heartbeat while the bus is quiet.

    A pump task drains `feed.watch()` into a queue, so a quiet spell (the heartbeat's
    timeout) cancels only a wait on the queue, never the watch: nothing is lost.
    """

    async def stream() -> AsyncIterator[str]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def pump() -> None:
            async for item in feed.watch():
                queue.put_nowait(item)

        pumping = asyncio.create_task(pump())
        try:
            while not await request.is_disconnected() and not pumping.done():
                try:
                    item = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                yield frame(item)
        finally:
            pumping.cancel()
            await asyncio.gather(pumping, return_exceptions=True)

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
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                yield ": still here\n\n"
            await asyncio.sleep(POLL_S)

    return sse(stream())
