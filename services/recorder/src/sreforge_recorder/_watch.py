"""What the recorder shows the dashboard of the bus: every message, and runs' SLI samples.

`BusWatch` subscribes (core NATS, no consumer) to every `sreforge.>` subject and fans
each message out, described by a few fields only (subject, type, run, time and a short
summary: never a payload, so nothing secret a payload might carry reaches a page), to
each open `/bus` stream. `sli(run_id)` reads the grading samples the oracle saves in the
run store (`oracle.samples.<run_id>.<n>`, appended in chunks while it grades).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from sreforge_bus import Bus, oracle_samples_key

__all__ = ["BusWatch", "describe"]

_QUEUE = 1000
_SAMPLE_FIELDS = ("offset_seconds", "at", "sli", "target_state", "client_p99_seconds",
                  "load_achieved_rps", "load_target_rps")  # fmt: skip
_SUMMARY_FIELDS = ("verdict", "stage", "reason", "scenario", "agent", "alert", "phase")


def describe(subject: str, data: bytes) -> dict[str, Any]:
    """A bus message as the dashboard shows it: named fields only, never the payload."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    kind = body.get("type")
    if subject.startswith("sreforge.deadletter."):
        kind = "dead letter"
    elif not isinstance(kind, str):
        kind = subject.rsplit(".", 1)[-1]
    picked = [f"{name}={str(body[name])[:80]}" for name in _SUMMARY_FIELDS if body.get(name)]
    return {
        "subject": subject,
        "type": kind,
        "run_id": body.get("run_id") if isinstance(body.get("run_id"), str) else None,
        "at": str(body.get("occurred_at") or ""),
        "summary": " ".join(picked),
    }


class BusWatch:
    """Every message on the bus, fanned out to each watcher (a slow one loses the oldest)."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._watchers: set[asyncio.Queue[dict[str, Any]]] = set()
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        """Subscribe to `sreforge.>` (the recorder's bus permission allows it)."""
        self._subscription = await self._bus.nc.subscribe("sreforge.>", cb=self._on)

    async def stop(self) -> None:
        """Unsubscribe; open watchers see no more messages."""
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
            self._subscription = None

    async def _on(self, message: Msg) -> None:
        item = describe(message.subject, message.data)
        for queue in self._watchers:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(item)

    async def watch(self) -> AsyncIterator[dict[str, Any]]:
        """Every message from now on (one dict each) until the caller stops iterating."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(_QUEUE)
        self._watchers.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers.discard(queue)

    async def sli(self, run_id: str) -> list[dict[str, Any]]:
        """The run's grading samples saved so far (a few fields each), in order."""
        found: list[dict[str, Any]] = []
        n = 0
        while (entry := await self._bus.runs.get(oracle_samples_key(run_id, n))) is not None:
            try:
                chunk = json.loads(entry.value)
            except ValueError:
                break
            found += [{k: s.get(k) for k in _SAMPLE_FIELDS} for s in chunk if isinstance(s, dict)]
            n += 1
        return found
