"""A durable consumer survives a nats-server restart: nothing stored is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sreforge_bus import Bus, ConsumerSpec, Delivery, PublishError, bootstrap
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import Seen, consumer_settled, poll
from sreforge_contracts import Event

pytestmark = pytest.mark.integration

MakePing = Callable[..., Event]
StartWorker = Callable[..., Any]
PINGS = "sreforge.run.*.test.ping"


async def _publish_until_stored(bus: Bus, event: Event) -> None:
    """Retry with the same event id while the client reconnects (dedupe keeps it single)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            await bus.publish(event)
            return
        except PublishError:
            if time.monotonic() > deadline:
                raise


@pytest.mark.timeout(60)
async def test_durable_consumer_survives_server_restart(
    nats_server: NatsServer, bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """Events before, during and after a restart are all handled exactly once.

    A handler in flight across the restart still gets its ack through, a running
    worker resumes pulling after the restart, and a durable whose worker was not
    running gets what was stored for it before the restart.
    """
    live = ConsumerSpec("live", (PINGS,))
    late = ConsumerSpec("late", (PINGS,))
    await bootstrap(bus, [live, late])
    seen_live: Seen[Any] = Seen()
    seen_late: Seen[Any] = Seen()

    in_flight, restarted = asyncio.Event(), asyncio.Event()

    async def handle_live(event: Any, delivery: Delivery) -> None:
        if event.n == 2:
            in_flight.set()
            await restarted.wait()
        seen_live.add(event, delivery)

    async def handle_late(event: Any, delivery: Delivery) -> None:
        seen_late.add(event, delivery)

    start_worker(live, handle_live)
    for n in range(3):
        await bus.publish(make_ping(n))
    await asyncio.wait_for(in_flight.wait(), 10)

    reconnects = bus.nc.stats["reconnects"]
    nats_server.restart()
    await poll(_true(lambda: bus.nc.stats["reconnects"] > reconnects), "the client to reconnect")
    restarted.set()
    for n in range(3, 6):
        await _publish_until_stored(bus, make_ping(n))
    await seen_live.wait_for(6, timeout=20)
    start_worker(late, handle_late)
    await seen_late.wait_for(6, timeout=20)

    assert sorted(e.n for e, _, _ in seen_live.items) == list(range(6))
    assert sorted(e.n for e, _, _ in seen_late.items) == list(range(6))
    await poll(lambda: consumer_settled(bus, "live"), "live consumer settled")
    await poll(lambda: consumer_settled(bus, "late"), "late consumer settled")


def _true(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def checked() -> bool:
        return check()

    return checked
