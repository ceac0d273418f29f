"""A service as the bus sees it: named routes from a durable consumer to a handler."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import structlog
from sreforge_contracts import MAX_MESSAGE_BYTES, Event

from sreforge_bus._bootstrap import ConsumerSpec
from sreforge_bus._connection import Bus
from sreforge_bus._worker import Delivery, Worker

__all__ = ["Context", "Handler", "Route", "Service", "log_only"]

T = TypeVar("T")


@dataclass(frozen=True)
class Context:
    """What a handler may touch besides its message: the delivery and the bus (for replies)."""

    bus: Bus
    delivery: Delivery
    log: structlog.stdlib.BoundLogger


Handler = Callable[[T, Context], Awaitable[Sequence[Event]]]


@dataclass(frozen=True)
class Route(Generic[T]):
    """Messages from `consumer`, parsed by `parse`, handled by `handler`.

    The handler returns the events its input caused; they are published (deduplicated
    by event id) before the message is acked, so a crash in between redelivers the
    input and republishes the same events harmlessly. A body over `max_bytes` is
    dead-lettered unparsed; `None` hands every body to `parse` (which must then refuse).
    """

    consumer: ConsumerSpec
    handler: Handler[T]
    parse: Callable[[bytes], T]
    max_bytes: int | None = MAX_MESSAGE_BYTES


@dataclass(frozen=True)
class Service:
    """A named set of routes; `run` serves them until `stop` is set."""

    name: str
    routes: tuple[Route[Any], ...] = field(default=())

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve every route until `stop` is set, then shut the workers down gracefully."""
        workers = [
            Worker(
                bus,
                route.consumer,
                self._deliver(bus, route),
                parse=route.parse,
                max_bytes=route.max_bytes,
            )
            for route in self.routes
        ]
        tasks = [asyncio.create_task(worker.run()) for worker in workers]
        await stop.wait()
        await asyncio.gather(*(worker.stop() for worker in workers))
        await asyncio.gather(*tasks)

    def _deliver(self, bus: Bus, route: Route[T]) -> Callable[[T, Delivery], Awaitable[None]]:
        log = structlog.get_logger(f"sreforge.{self.name}")

        async def deliver(message: T, delivery: Delivery) -> None:
            context = Context(bus=bus, delivery=delivery, log=log.bind(subject=delivery.subject))
            for event in await route.handler(message, context):
                await bus.publish(event)

        return deliver


async def log_only(message: object, context: Context) -> Sequence[Event]:
    """A placeholder handler: log what arrived and cause nothing."""
    context.log.info("received", message_type=type(message).__name__)
    return ()
