"""Helpers for tests that run against a real NATS: deadline waits, stream reads and an
engine home holding the secrets the bus kit and the recorder must never let out.

No sleeps for correctness: every wait polls or waits on an event, with a
deadline and an assertion message that says what did not happen.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Generic, TypeVar

from sreforge_bus._connection import Bus
from sreforge_bus._credentials import ensure_credentials
from sreforge_bus._follow import RawMessage, follow
from sreforge_bus._names import STREAM
from sreforge_bus._permissions import OPERATOR_USER
from sreforge_bus._worker import Delivery

__all__ = [
    "Seen",
    "consumer_settled",
    "engine_home",
    "operator_password",
    "poll",
    "read_stream",
]

T = TypeVar("T")


class Seen(Generic[T]):
    """What a test handler saw (value, delivery, monotonic time), with a deadline-bound wait."""

    def __init__(self) -> None:
        self.items: list[tuple[T, Delivery, float]] = []
        self._changed = asyncio.Event()

    def add(self, value: T, delivery: Delivery) -> None:
        """Record one handled message."""
        self.items.append((value, delivery, time.monotonic()))
        self._changed.set()

    async def wait_for(self, count: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Wait until at least `count` items were seen; AssertionError after `timeout` seconds."""

        async def reached() -> None:
            while len(self.items) < count:
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(reached(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"saw {len(self.items)} of {count} deliveries within {timeout}s"
            ) from None


async def poll(
    check: Callable[[], Awaitable[bool]],
    what: str,
    timeout: float = 10.0,  # noqa: ASYNC109
) -> None:
    """Re-check `check` until it holds; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def read_stream(
    bus: Bus,
    subject: str,
    count: int,
    timeout: float = 10.0,  # noqa: ASYNC109
) -> list[RawMessage]:
    """Return the first `count` stored messages on `subject`; AssertionError if fewer arrive."""
    found: list[RawMessage] = []

    async def read() -> None:
        async for message in follow(bus, subject):
            found.append(message)
            if len(found) == count:
                return

    try:
        await asyncio.wait_for(read(), timeout)
    except TimeoutError:
        raise AssertionError(
            f"found {len(found)} of {count} messages on {subject} within {timeout}s"
        ) from None
    return found


async def consumer_settled(bus: Bus, durable: str) -> bool:
    """True when durable `durable` has nothing pending, unacked or awaiting redelivery."""
    info = await bus.js.consumer_info(STREAM, durable)
    return bool(info.num_pending == 0 and info.num_ack_pending == 0 and info.num_redelivered == 0)


def engine_home(home: Path, trigger_token: str) -> Path:
    """`home` made an engine home: every bus user's credential and the trigger's token."""
    ensure_credentials(home / "nats")
    (home / "trigger.token").write_text(trigger_token + "\n")
    return home


def operator_password(home: Path) -> str:
    """The operator's bus password, as the engine home's credential file holds it."""
    record = json.loads((home / "nats" / f"{OPERATOR_USER}.json").read_text())
    password: str = record["password"]
    return password
