"""The one way to build a service: typed routes whose handlers return their events,
background tasks, and start/stop hooks.

```python
SERVICE = Service(
    name="oracle",
    routes=(Route.on(CI_CONSUMER, CiResult, oracle.on_ci_result),),
    tasks=(oracle.halt_on_stop,),      # (bus, stopping) -> None, runs while serving
    on_start=(oracle.open,),           # (bus) -> None, before the first delivery
    on_stop=(oracle.close,),           # (bus) -> None, after the last handler returned
)
```

A handler gets its parsed message and a `Context` and returns what the message caused:
a sequence of events, or an `Emit` when a reply or a second step follows them. The
service publishes it before the message is acked; the handler never publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Union, overload

import structlog
from pydantic import BaseModel
from sreforge_contracts import MAX_MESSAGE_BYTES, ContractError, Event, RunState, parse_event

from sreforge_bus._bootstrap import ConsumerSpec
from sreforge_bus._connection import Bus
from sreforge_bus._errors import BusError, ServiceError
from sreforge_bus._once import Once
from sreforge_bus._runs import RunStore
from sreforge_bus._worker import Delivery, Worker

__all__ = [
    "Context",
    "Emit",
    "Handled",
    "Handler",
    "Hook",
    "Route",
    "Service",
    "Task",
    "log_only",
    "parse_as",
]

T = TypeVar("T")
E = TypeVar("E", bound=Event)
F = TypeVar("F", bound=Event)


@dataclass(frozen=True)
class Emit:
    """What a message caused when it is more than a list of events.

    The service publishes `events` in order (deduplicated by event id), then answers
    the command's sender with `reply`, then awaits `then` and emits what it returns the
    same way: a step that may only run once the first events are stored (a claim marked
    done, a stage going on). When the bus refuses the events, `refused` answers in their
    place (undoing what was started); without it the error fails the handler.
    """

    events: Sequence[Event] = ()
    reply: BaseModel | None = None
    then: Callable[[], Awaitable[Handled]] | None = None
    refused: Callable[[BusError], Awaitable[Handled]] | None = None


Handled = Union[Sequence[Event], Emit]  # noqa: UP007 (a runtime alias naming a later class)


@dataclass(frozen=True)
class Context:
    """What a handler may touch besides its message: the delivery, the bus, a logger."""

    bus: Bus
    delivery: Delivery
    log: structlog.stdlib.BoundLogger

    @property
    def runs(self) -> RunStore:
        """The run store (KV `sreforge-runs`)."""
        return self.bus.runs

    async def run_state(self, run_id: str) -> RunState | None:
        """The run's state (None: no such run; `RunStateUnreadable` when it is invalid)."""
        return await self.bus.runs.run_state(run_id)

    def once(self, owner: str, run_id: str) -> Once:
        """`owner`'s once-per-run claim on `run_id`."""
        return self.bus.runs.once(owner, run_id)

    async def emit(self, handled: Handled) -> None:
        """Publish `handled` now, as the service would after the handler.

        Only for a stage that must go on inside the handler's own scope (a lock it
        holds); everything else returns its events.
        """
        await emit(self.bus, self.delivery, handled)


Handler = Callable[[T, Context], Awaitable[Handled]]
Hook = Callable[[Bus], Awaitable[None]]
Task = Callable[[Bus, asyncio.Event], Coroutine[Any, Any, None]]
"""A background task: runs while the service serves, returns once the event is set."""


@overload
def parse_as(kind: type[E], /) -> Callable[[bytes], E]: ...
@overload
def parse_as(kind: type[E], other: type[F], /) -> Callable[[bytes], E | F]: ...
def parse_as(*kinds: type[Event]) -> Callable[[bytes], Event]:
    """A parser accepting only events of `kinds` (anything else is a `ContractError`)."""
    names = " or ".join(kind.__name__ for kind in kinds)

    def parse(data: bytes) -> Event:
        event = parse_event(data)
        if not isinstance(event, kinds):
            raise ContractError(f"expected a {names} event, got {event.type}")
        return event

    return parse


@dataclass(frozen=True)
class Route(Generic[T]):
    """Messages from `consumer`, parsed by `parse`, handled by `handler`.

    What the handler returns is published (deduplicated by event id) before the
    message is acked, so a crash in between redelivers the input and republishes the
    same events harmlessly. A handler that raises has its message redelivered with
    backoff and, after `consumer.max_deliver` attempts (or at once when `parse`
    refuses it), dead-lettered on `sreforge.deadletter.<durable>`. A body over
    `max_bytes` is dead-lettered unparsed; `None` hands every body to `parse`.
    """

    consumer: ConsumerSpec
    handler: Handler[T]
    parse: Callable[[bytes], T]
    max_bytes: int | None = MAX_MESSAGE_BYTES
    concurrency: int = 4
    held: Callable[[], int] | None = None
    """Work of this route that outlives its handler (see `Worker`); None: only handlers."""

    @classmethod
    def on(cls, consumer: ConsumerSpec, kind: type[E], handler: Handler[E]) -> Route[E]:
        """The route of one event type: other types on its subjects are dead-lettered."""
        return Route(consumer, handler, parse_as(kind))


@dataclass(frozen=True)
class Service:
    """A named set of routes, background tasks and hooks; `run` serves them until `stop`."""

    name: str
    routes: tuple[Route[Any], ...] = field(default=())
    tasks: tuple[Task, ...] = field(default=())
    on_start: tuple[Hook, ...] = field(default=())
    on_stop: tuple[Hook, ...] = field(default=())

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Run the start hooks, serve until `stop` is set, then stop gracefully.

        Stopping lets in-flight handlers finish and the tasks return, then runs the stop
        hooks (also when serving failed). A task that fails, or returns before `stop`,
        ends `run` with its error (`ServiceError` when it had none), so the engine never
        keeps a service that silently lost a part.
        """
        for hook in self.on_start:
            await hook(bus)
        try:
            await self._serve(bus, stop)
        finally:
            for hook in self.on_stop:
                await hook(bus)

    async def _serve(self, bus: Bus, stop: asyncio.Event) -> None:
        workers = [
            Worker(
                bus,
                route.consumer,
                self._deliver(bus, route),
                parse=route.parse,
                max_bytes=route.max_bytes,
                concurrency=route.concurrency,
                held=route.held,
            )
            for route in self.routes
        ]
        serving = [asyncio.create_task(worker.run()) for worker in workers]
        stopping = asyncio.Event()
        background = [
            asyncio.create_task(task(bus, stopping), name=f"{self.name}:{_name_of(task)}")
            for task in self.tasks
        ]
        try:
            await _until_stopped(stop, background)
        finally:
            stopping.set()
            await asyncio.gather(*(worker.stop() for worker in workers))
            await asyncio.gather(*serving)
            await asyncio.gather(*background, return_exceptions=True)

    def _deliver(self, bus: Bus, route: Route[T]) -> Callable[[T, Delivery], Awaitable[None]]:
        log = structlog.get_logger(f"sreforge.{self.name}")

        async def deliver(message: T, delivery: Delivery) -> None:
            context = Context(bus=bus, delivery=delivery, log=log.bind(subject=delivery.subject))
            await emit(bus, delivery, await route.handler(message, context))

        return deliver


async def emit(bus: Bus, delivery: Delivery, handled: Handled) -> None:
    """Publish what a handler returned, step by step (see `Emit`)."""
    step: Handled | None = handled
    while step is not None:
        if not isinstance(step, Emit):
            for event in step:
                await bus.publish(event)
            return
        try:
            for event in step.events:
                await bus.publish(event)
        except BusError as error:
            if step.refused is None:
                raise
            step = await step.refused(error)
            continue
        if step.reply is not None:
            await bus.reply(delivery, step.reply)
        step = None if step.then is None else await step.then()


async def _until_stopped(stop: asyncio.Event, background: list[asyncio.Task[None]]) -> None:
    stopped = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([stopped, *background], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopped
    if stop.is_set():
        return
    for task in done:
        task.result()  # raises the task's error, if it had one
        raise ServiceError(f"{task.get_name()} stopped before the service was")


def _name_of(task: Task) -> str:
    return getattr(task, "__name__", type(task).__name__)


async def log_only(message: object, context: Context) -> Sequence[Event]:
    """A placeholder handler: log what arrived and cause nothing."""
    context.log.info("received", message_type=type(message).__name__)
    return ()
