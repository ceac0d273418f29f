"""Service/Route: a handler's returned events are published before its input is acked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pytest
from sreforge_bus import Bus, ConsumerSpec, Context, Route, Service, bootstrap
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import Event

pytestmark = pytest.mark.integration

MakePing = Callable[..., Event]


class Pong(Event):
    """The event the test service emits for each ping."""

    type: Literal["test.pong"] = "test.pong"
    n: int


async def test_service_publishes_what_its_handler_returns(bus: Bus, make_ping: MakePing) -> None:
    """Each ping handled by the service's route yields one stored pong, and the ping is acked."""
    ping_type = type(make_ping(0))

    async def answer(ping: Any, context: Context) -> Sequence[Event]:
        pong = Pong(
            event_id=f"{ping.run_id}.pong.{ping.n}", run_id=ping.run_id, producer="t", n=ping.n
        )
        return [pong]

    route = Route(
        consumer=ConsumerSpec("pinger", ("sreforge.run.*.test.ping",)),
        handler=answer,
        parse=ping_type.model_validate_json,
    )
    service = Service(name="pinger", routes=(route,))
    await bootstrap(bus, [route.consumer])
    stop = asyncio.Event()
    serving = asyncio.create_task(service.run(bus, stop))
    for n in range(3):
        await bus.publish(make_ping(n))
    pongs = await read_stream(bus, "sreforge.run.*.test.pong", 3)
    assert sorted(Pong.model_validate_json(m.data).n for m in pongs) == [0, 1, 2]
    await poll(lambda: consumer_settled(bus, "pinger"), "pings acked")
    stop.set()
    await asyncio.wait_for(serving, 10)
