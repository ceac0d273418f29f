"""The parts every service is built from: typed routes, `Emit`, dead letters, once-per-run
claims, the run-state reader, background tasks and start/stop hooks (real NATS)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
from sreforge_bus import (
    DEADLETTER_PREFIX,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_RUN_ID,
    Bus,
    ConsumerSpec,
    Context,
    Emit,
    Route,
    RunStateUnreadable,
    Service,
    ServiceError,
    bootstrap,
    run_state_key,
)
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import DEADLETTER_PREFIX as CONTRACTS_DEADLETTER_PREFIX
from sreforge_contracts import CleanedUp, ContractError, Event, RunFailed, RunState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

MakePing = Callable[..., Event]
PINGS = "sreforge.run.*.test.ping"


class Pong(Event):
    """The event the test services emit for a ping."""

    type: Literal["test.pong"] = "test.pong"
    n: int
    by: str = ""


def pong(ping: Any, by: str = "", step: int = 0) -> Pong:
    """The pong answering `ping` (one event id per step, so steps are not deduplicated)."""
    return Pong(
        event_id=f"{ping.run_id}.pong.{ping.n}.{step}",
        run_id=ping.run_id,
        producer="tests",
        n=ping.n,
        by=by,
    )


@asynccontextmanager
async def serving(bus: Bus, *services: Service) -> AsyncIterator[asyncio.Event]:
    """Bootstrap and run `services` until the block ends, then stop them gracefully."""
    await bootstrap(bus, [route.consumer for s in services for route in s.routes])
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.run(bus, stop)) for s in services]
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)


async def test_typed_route_publishes_each_step_of_an_emit_in_order(
    bus: Bus, make_ping: MakePing
) -> None:
    """An `Emit`'s `then` runs only after its first events are stored, and what `then`
    returns is published too, before the ping is acked."""
    ping_type = type(make_ping(0))
    stored_before_then: list[int] = []

    async def answer(ping: Any, context: Context) -> Emit:
        assert isinstance(ping, ping_type)

        async def then() -> Sequence[Event]:
            stored_before_then.append(await _stored_pongs(bus))
            return [pong(ping, step=1)]

        return Emit(events=[pong(ping, step=0)], then=then)

    route = Route(ConsumerSpec("emitter", (PINGS,)), answer, ping_type.model_validate_json)
    async with serving(bus, Service(name="emitter", routes=(route,))):
        await bus.publish(make_ping(7))
        pongs = await read_stream(bus, "sreforge.run.*.test.pong", 2)
        await poll(lambda: consumer_settled(bus, "emitter"), "the ping acked")
    assert [Pong.model_validate_json(m.data).event_id for m in pongs] == [
        "r1.pong.7.0",
        "r1.pong.7.1",
    ]
    assert stored_before_then == [1]


def test_route_on_parses_only_its_event_type() -> None:
    """`Route.on(consumer, Kind, handler)` parses `Kind` and refuses any other event type,
    which the worker then dead-letters instead of handing it to the handler."""
    route = Route.on(ConsumerSpec("typed", ("sreforge.run.*.RunFailed",)), RunFailed, _ignore)
    failed = RunFailed(run_id="run-typed", producer="tests", stage="t", reason="r", verdict="error")
    assert route.parse(failed.model_dump_json().encode()) == failed
    other = CleanedUp(run_id="run-typed", producer="tests", verified=True)
    with pytest.raises(ContractError, match="expected a RunFailed event, got CleanedUp"):
        route.parse(other.model_dump_json().encode())


async def _ignore(event: RunFailed, context: Context) -> Sequence[Event]:
    return ()


async def test_a_failing_handler_is_dead_lettered_under_the_one_prefix(
    bus: Bus, make_ping: MakePing
) -> None:
    """After `max_deliver` failures the ping lands on `sreforge.deadletter.<durable>`,
    the prefix the contracts name too, with its durable and run in the headers."""
    attempts: list[int] = []

    async def fail(ping: Any, context: Context) -> Sequence[Event]:
        attempts.append(context.delivery.num_delivered)
        raise RuntimeError("handler broke")

    spec = ConsumerSpec("breaker", (PINGS,), max_deliver=2, backoff=(0.05,))
    route = Route(spec, fail, type(make_ping(0)).model_validate_json)
    async with serving(bus, Service(name="breaker", routes=(route,))):
        await bus.publish(make_ping(1, run_id="run-dead"))
        [letter] = await read_stream(bus, f"{DEADLETTER_PREFIX}>", 1)
    assert DEADLETTER_PREFIX == CONTRACTS_DEADLETTER_PREFIX == "sreforge.deadletter."
    assert letter.subject == "sreforge.deadletter.breaker"
    assert letter.headers[HEADER_DEADLETTER_DURABLE] == "breaker"
    assert letter.headers[HEADER_DEADLETTER_RUN_ID] == "run-dead"
    assert attempts == [1, 2]


async def test_a_once_per_run_claim_is_won_by_one_of_two_services(
    bus: Bus, make_ping: MakePing
) -> None:
    """Two services handle every ping; each claims the ping's run, so exactly one answers
    per run, and the claim holds the winner's name for a redelivery to read back."""
    ping_type = type(make_ping(0))

    def claimer(name: str) -> Service:
        async def answer(ping: Any, context: Context) -> Sequence[Event]:
            if not await context.once("tests.once", ping.run_id).claim(name.encode()):
                return ()
            return [pong(ping, by=name)]

        route = Route(ConsumerSpec(name, (PINGS,)), answer, ping_type.model_validate_json)
        return Service(name=name, routes=(route,))

    runs = [f"run-{n}" for n in range(6)]
    async with serving(bus, claimer("left"), claimer("right")):
        for n, run_id in enumerate(runs):
            await bus.publish(make_ping(n, run_id=run_id))
        pongs = await read_stream(bus, "sreforge.run.*.test.pong", len(runs))
        for name in ("left", "right"):
            await poll(lambda name=name: consumer_settled(bus, name), f"{name} settled")
    answered = {
        Pong.model_validate_json(m.data).run_id: Pong.model_validate_json(m.data).by for m in pongs
    }
    assert sorted(answered) == runs
    assert await _stored_pongs(bus) == len(runs)
    for run_id, by in answered.items():
        assert await bus.runs.once("tests.once", run_id).value() == by.encode()


async def test_run_state_reader_reads_none_or_a_state_and_refuses_a_bad_one(bus: Bus) -> None:
    """The one reader every service uses: absent → None, stored → the RunState, anything
    else → `RunStateUnreadable`, which is a `ValueError` for callers falling back."""
    state = RunState(
        run_id="run-state",
        scenario_id="latency-cache-stampede",
        agent="noop",
        time_scale=1.0,
        alert_route="route-1",
    )
    assert await bus.runs.run_state("run-state") is None
    await bus.runs.put(run_state_key("run-state"), state.model_dump_json().encode())
    assert await bus.runs.run_state("run-state") == state
    await bus.runs.put(run_state_key("run-bad"), json.dumps({"run_id": 3}).encode())
    with pytest.raises(RunStateUnreadable, match="run-bad") as raised:
        await bus.runs.run_state("run-bad")
    assert isinstance(raised.value, ValueError)


async def test_hooks_and_tasks_run_around_the_routes(bus: Bus, make_ping: MakePing) -> None:
    """Start hooks run before the first delivery, tasks until stop, stop hooks after the
    last handler returned."""
    order: list[str] = []
    release = asyncio.Event()

    async def start(bus: Bus) -> None:
        order.append("start")

    async def handle(ping: Any, context: Context) -> Sequence[Event]:
        order.append("handler")
        await release.wait()
        order.append("handler done")
        return ()

    async def background(bus: Bus, stopping: asyncio.Event) -> None:
        await stopping.wait()
        order.append("task stopped")
        release.set()

    async def stop_hook(bus: Bus) -> None:
        order.append("stop")

    route = Route(ConsumerSpec("hooked", (PINGS,)), handle, type(make_ping(0)).model_validate_json)
    service = Service(
        name="hooked", routes=(route,), tasks=(background,), on_start=(start,), on_stop=(stop_hook,)
    )
    async with serving(bus, service):
        await bus.publish(make_ping(1))
        await poll(lambda: _true_when("handler" in order), "the handler started")
    assert order == ["start", "handler", "task stopped", "handler done", "stop"]


async def test_a_task_that_ends_early_ends_the_service_with_its_error(bus: Bus) -> None:
    """A background task that fails (or returns before stop) stops the service, and the
    stop hooks still run: the engine sees a crash instead of a service missing a part."""
    stopped: list[str] = []

    async def broken(bus: Bus, stopping: asyncio.Event) -> None:
        raise RuntimeError("listener died")

    async def quitter(bus: Bus, stopping: asyncio.Event) -> None:
        return

    async def record(bus: Bus) -> None:
        stopped.append("stop")

    stop = asyncio.Event()
    with pytest.raises(RuntimeError, match="listener died"):
        await Service(name="b", tasks=(broken,), on_stop=(record,)).run(bus, stop)
    with pytest.raises(ServiceError, match="quitter stopped before the service"):
        await Service(name="q", tasks=(quitter,), on_stop=(record,)).run(bus, stop)
    assert stopped == ["stop", "stop"]


async def _true_when(value: bool) -> bool:
    return value


async def _stored_pongs(bus: Bus) -> int:
    info = await bus.js.stream_info("SREFORGE", subjects_filter="sreforge.run.*.test.pong")
    return sum((info.state.subjects or {}).values())
