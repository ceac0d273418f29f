"""The dashboard's whole-bus stream over a quiet bus: heartbeats, and nothing lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sreforge_report import _live


class _Feed:
    """A bus feed the test publishes to (a test double for the recorder's `BusWatch`)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def watch(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self.queue.get()

    async def sli(self, run_id: str) -> list[dict[str, Any]]:
        return []


class _Connected:
    """A request whose client never leaves."""

    async def is_disconnected(self) -> bool:
        return False


async def test_a_quiet_spell_longer_than_the_heartbeat_loses_no_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Messages before and after several heartbeats all arrive on the one stream."""
    monkeypatch.setattr(_live, "HEARTBEAT_S", 0.05)
    feed = _Feed()
    response = _live.bus_stream(_Connected(), feed)  # type: ignore[arg-type]
    frames = response.body_iterator
    feed.queue.put_nowait({"type": "first"})
    assert json.loads(str(await anext(frames)).removeprefix("data: "))["type"] == "first"
    beats = [await anext(frames) for _ in range(3)]  # three quiet spells
    assert beats == [": still here\n\n"] * 3
    feed.queue.put_nowait({"type": "after the quiet"})
    item = await anext(frames)
    while str(item).startswith(":"):
        item = await anext(frames)
    assert json.loads(str(item).removeprefix("data: "))["type"] == "after the quiet"
    await frames.aclose()  # type: ignore[attr-defined]
