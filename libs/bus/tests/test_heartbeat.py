"""Heartbeats keep a long handler's message; a dead worker's message returns within ack_wait;
a message redelivered while its handler still runs (a stalled loop) is not handled twice.

The first worker runs in its own process, its handler blocked in a thread
(`asyncio.to_thread`, as the deployer's stages are) for longer than the ack wait; the
second worker, here, must not see the message while the first lives, and must get it
within about one ack wait once the first is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import time
from typing import Any

import pytest
from sreforge_bus import Bus, ConsumerSpec, Delivery, bootstrap
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import Seen

from .conftest import MakePing, StartWorker

pytestmark = pytest.mark.integration

ACK_WAIT_S = 1.5
SPEC = ConsumerSpec("beat", ("sreforge.run.*.test.ping",), ack_wait=ACK_WAIT_S)

_CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from typing import Literal
    from sreforge_bus import ConsumerSpec, Worker, connect
    from sreforge_contracts import Event

    class Ping(Event):
        type: Literal["test.ping"] = "test.ping"
        n: int

    async def main() -> None:
        bus = await connect(sys.argv[1], name="doomed")
        spec = ConsumerSpec("beat", ("sreforge.run.*.test.ping",), ack_wait=float(sys.argv[2]))

        async def handle(event: Ping, delivery: object) -> None:
            print("handling", flush=True)
            await asyncio.to_thread(time.sleep, 600)

        await Worker(bus, spec, handle, parse=Ping.model_validate_json).run()

    asyncio.run(main())
    """
)


@pytest.mark.timeout(60)
async def test_a_killed_workers_message_comes_back_within_the_ack_wait(
    nats_server: NatsServer, bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """Alive (handler in a thread past 3 ack waits): kept; killed: redelivered in ~ack_wait."""
    await bootstrap(bus, [SPEC])
    argv = [sys.executable, "-c", _CHILD, nats_server.url, str(ACK_WAIT_S)]
    child = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    try:
        await bus.publish(make_ping(1))
        await asyncio.wait_for(_handling(child), 20)
        seen: Seen[Any] = Seen()

        async def handle(event: Any, delivery: Delivery) -> None:
            seen.add(event, delivery)

        start_worker(SPEC, handle)
        await asyncio.sleep(3 * ACK_WAIT_S)  # the claim under test is "nothing arrives"
        assert seen.items == [], "redelivered while its worker was alive and beating"
        os.killpg(child.pid, signal.SIGKILL)
        killed = time.monotonic()
        await seen.wait_for(1, timeout=4 * ACK_WAIT_S)
        back = time.monotonic() - killed
        assert back <= ACK_WAIT_S + 1.0, f"redelivered {back:.1f} s after the kill"
        (_, delivery, _), *_ = seen.items
        assert delivery.num_delivered == 2
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        await child.wait()


async def _handling(child: asyncio.subprocess.Process) -> None:
    """Read the child's output (its bus logs too) until its handler started."""
    assert child.stdout is not None
    while (line := await child.stdout.readline()) and line.strip() != b"handling":
        pass
    assert line, "the worker process ended before handling the message"


@pytest.mark.timeout(60)
async def test_a_stalled_loop_does_not_get_its_running_message_handled_twice(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """The handler blocks the loop past the ack wait (no in-progress ack can go out), so the
    server redelivers to the same worker while the handler still runs: handled once, and
    its one ack settles the message (nothing comes back afterwards)."""
    ack_wait = 0.5
    spec = ConsumerSpec("stall", ("sreforge.run.*.test.ping",), ack_wait=ack_wait, max_deliver=5)
    await bootstrap(bus, [spec])
    calls: list[int] = []
    done = asyncio.Event()

    async def handle(event: Any, delivery: Delivery) -> None:
        calls.append(delivery.num_delivered)
        if len(calls) == 1:
            time.sleep(4 * ack_wait)  # noqa: ASYNC251 -- the stall under test: the loop blocked
            await asyncio.sleep(4 * ack_wait)  # the redelivery arrives meanwhile
        done.set()

    start_worker(spec, handle)
    await bus.publish(make_ping(1))
    await asyncio.wait_for(done.wait(), 20)
    info = await bus.js.consumer_info(spec.stream, spec.durable)
    deadline = time.monotonic() + 10
    while info.num_ack_pending and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        info = await bus.js.consumer_info(spec.stream, spec.durable)
    deliveries = info.delivered.consumer_seq if info.delivered else 0
    assert deliveries >= 2, "the stall did not make the server redeliver"
    assert info.num_ack_pending == 0, "the running handler's ack did not settle the message"
    await asyncio.sleep(4 * ack_wait)  # the claim under test is "nothing comes back"
    assert calls == [1], f"handled {len(calls)} times (deliveries {calls})"
