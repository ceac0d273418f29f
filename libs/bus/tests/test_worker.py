"""The durable pull-consumer worker against a real nats-server: ack, retry, dead-letter, stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from sreforge_bus import (
    HEADER_DEADLETTER_BODY_DROPPED,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_ERROR,
    HEADER_DEADLETTER_NUM_DELIVERED,
    HEADER_DEADLETTER_RUN_ID,
    HEADER_DEADLETTER_SUBJECT,
    STREAM,
    Bus,
    BusError,
    ConsumerSpec,
    Delivery,
    Worker,
    bootstrap,
    run_of_subject,
)
from sreforge_bus.testing import Seen, consumer_settled, poll, read_stream
from sreforge_contracts import MAX_MESSAGE_BYTES, Event

from .conftest import Ping

pytestmark = pytest.mark.integration

MakePing = Callable[..., Event]
StartWorker = Callable[..., Any]
PINGS = "sreforge.run.*.test.ping"


async def test_published_events_are_handled_and_acked(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """Each published event reaches the handler once, typed, and is acked after it returns."""
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)

    start_worker(spec, handle)
    for n in range(5):
        await bus.publish(make_ping(n))
    await seen.wait_for(5)
    assert sorted(event.n for event, _, _ in seen.items) == [0, 1, 2, 3, 4]
    assert all(
        d.num_delivered == 1 and d.subject == "sreforge.run.r1.test.ping" for _, d, _ in seen.items
    )
    await poll(lambda: consumer_settled(bus, "svc"), "all five acked")
    info = await bus.js.consumer_info(STREAM, "svc")
    assert info.ack_floor.stream_seq == 5


async def test_redelivered_or_republished_event_acts_once(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """A crash after the side effect (redelivery) and a republish both skip the side effect.

    The handler claims the event id in the run store before acting, so a second
    delivery of the same fact finds the claim taken and only acks.
    """
    spec = ConsumerSpec("svc", (PINGS,), backoff=(0.05,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()
    side_effects: list[int] = []

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)
        if await bus.runs.claim(f"handled.{event.event_id}", b"1"):
            side_effects.append(event.n)
            if delivery.num_delivered == 1:
                raise RuntimeError("crash after the side effect, before the ack")

    start_worker(spec, handle)
    event = make_ping(1)
    await bus.publish(event)
    # The same fact again under a new message id, as after the dedupe window has passed.
    data = event.model_dump_json().encode()
    await bus.publish_raw(event.subject, data, {"Nats-Msg-Id": "late-republish"})
    await seen.wait_for(3)
    await poll(lambda: consumer_settled(bus, "svc"), "both messages acked")
    assert side_effects == [1]
    assert sorted(d.num_delivered for _, d, _ in seen.items) == [1, 1, 2]


async def test_poison_message_is_dead_lettered_and_the_worker_keeps_going(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """Malformed JSON and unknown fields go to `sreforge.deadletter.<durable>`; later events
    are still handled."""
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)

    start_worker(spec, handle)
    subject = "sreforge.run.r1.test.ping"
    await bus.publish_raw(subject, b"{not json")
    bad_field = make_ping(1).model_dump(mode="json") | {"surprise": 1}
    await bus.publish_raw(subject, json.dumps(bad_field).encode())
    await bus.publish(make_ping(2))
    await seen.wait_for(1)
    assert [event.n for event, _, _ in seen.items] == [2]

    dead = await read_stream(bus, "sreforge.deadletter.svc", 2)
    assert dead[0].data == b"{not json"
    for message in dead:
        assert message.headers[HEADER_DEADLETTER_SUBJECT] == subject
        assert message.headers[HEADER_DEADLETTER_NUM_DELIVERED] == "1"
        assert "unparsable" in message.headers[HEADER_DEADLETTER_ERROR]
        assert HEADER_DEADLETTER_RUN_ID not in message.headers, "`r1` is not a run id"
    assert "surprise" in dead[1].headers[HEADER_DEADLETTER_ERROR]
    await poll(lambda: consumer_settled(bus, "svc"), "poison terminated, good event acked")


async def test_handler_failing_twice_is_retried_with_backoff_then_acked(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """Failures nak with the spec's growing delays; the third attempt succeeds and is acked."""
    spec = ConsumerSpec("svc", (PINGS,), max_deliver=5, backoff=(0.2, 0.4))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)
        if delivery.num_delivered < 3:
            raise RuntimeError(f"transient failure {delivery.num_delivered}")

    start_worker(spec, handle)
    await bus.publish(make_ping(1))
    await seen.wait_for(3)
    await poll(lambda: consumer_settled(bus, "svc"), "the third attempt acked")
    attempts = [d.num_delivered for _, d, _ in seen.items]
    times = [t for _, _, t in seen.items]
    assert attempts == [1, 2, 3]
    assert times[1] - times[0] >= 0.2 * 0.9
    assert times[2] - times[1] >= 0.4 * 0.9
    info = await bus.js.consumer_info(STREAM, "svc")
    assert (info.delivered.consumer_seq, info.ack_floor.stream_seq) == (3, 1)
    assert (await bus.js.stream_info(STREAM)).state.messages == 1  # nothing dead-lettered


async def test_exhausted_retries_are_dead_lettered(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """After `max_deliver` failed attempts the message is dead-lettered with the error,
    the durable and the run its subject names."""
    spec = ConsumerSpec("svc", (PINGS,), max_deliver=2, backoff=(0.05,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)
        if event.n == 1:
            raise ValueError("always broken")

    start_worker(spec, handle)
    await bus.publish(make_ping(1, run_id="run-0001"))
    await bus.publish(make_ping(2))
    [dead] = await read_stream(bus, "sreforge.deadletter.svc", 1)
    assert dead.headers[HEADER_DEADLETTER_NUM_DELIVERED] == "2"
    assert "always broken" in dead.headers[HEADER_DEADLETTER_ERROR]
    assert dead.headers[HEADER_DEADLETTER_DURABLE] == "svc"
    assert dead.headers[HEADER_DEADLETTER_RUN_ID] == "run-0001"
    await poll(lambda: consumer_settled(bus, "svc"), "dead-lettered message terminated")
    assert sorted((e.n, d.num_delivered) for e, d, _ in seen.items) == [(1, 1), (1, 2), (2, 1)]


async def test_concurrency_is_bounded(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """No more than `concurrency` handlers run at once, and all of them do run."""
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    running, peak, done = 0, 0, 0
    release = asyncio.Event()
    all_done = asyncio.Event()

    async def handle(event: Any, delivery: Delivery) -> None:
        nonlocal running, peak, done
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        done += 1
        if done == 6:
            all_done.set()

    start_worker(spec, handle, concurrency=2)
    for n in range(6):
        await bus.publish(make_ping(n))
    await poll(lambda: _true(running == 2), "two handlers running")
    release.set()
    await asyncio.wait_for(all_done.wait(), 10)
    assert peak == 2


async def test_stop_lets_in_flight_handlers_finish(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """`stop()` stops fetching but returns only after the running handler finished and acked."""
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    started, release = asyncio.Event(), asyncio.Event()

    async def handle(event: Any, delivery: Delivery) -> None:
        started.set()
        await release.wait()

    worker = start_worker(spec, handle)
    await bus.publish(make_ping(1))
    await asyncio.wait_for(started.wait(), 10)
    stopping = asyncio.ensure_future(worker.stop())
    await asyncio.sleep(0.05)  # give a broken stop() the chance to return early
    assert not stopping.done(), "stop() returned while a handler was still running"
    release.set()
    await asyncio.wait_for(stopping, 10)
    await poll(lambda: consumer_settled(bus, "svc"), "the in-flight message acked")


async def _true(value: bool) -> bool:
    return value


async def test_idle_worker_renews_expired_pull_requests(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pull requests that expire on the server return their credit, so an idle worker keeps
    receiving: events published after several expiries are still handled promptly."""
    from sreforge_bus import _pull

    monkeypatch.setattr(_pull, "_EXPIRES_S", 0.3)
    monkeypatch.setattr(_pull, "_HEARTBEAT_S", 0.1)
    monkeypatch.setattr(_pull, "_SILENCE_S", 5.0)
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()
    expired = asyncio.Event()

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)

    async def count_expiries(msg: Any) -> None:
        if msg.headers and msg.headers.get("Status") == "408":
            expired.set()

    start_worker(spec, handle, concurrency=2)
    for n in range(3):
        # Each round waits for a pull request to expire before publishing.
        expired.clear()
        probe = await bus.nc.subscribe("_INBOX.>", cb=count_expiries)
        await asyncio.wait_for(expired.wait(), 5)
        await probe.unsubscribe()
        await bus.publish(make_ping(n))
        await seen.wait_for(n + 1, timeout=2)
    await poll(lambda: consumer_settled(bus, "svc"), "all acked")


async def test_worker_for_a_missing_durable_names_it(bus: Bus) -> None:
    """Running a worker whose consumer was never bootstrapped fails naming the durable."""
    worker: Worker[Any] = Worker(bus, ConsumerSpec("ghost", (PINGS,)), _noop, parse=bytes)
    with pytest.raises(BusError, match="ghost"):
        await worker.run()


async def _noop(value: Any, delivery: Delivery) -> None:
    return None


async def test_closing_the_bus_stops_workers_before_draining(
    nats_server: Any, make_ping: MakePing
) -> None:
    """`Bus.close()` ends every worker's loop (after its in-flight handler) and then drains."""
    from sreforge_bus import connect

    own = await connect(nats_server.url, name="closer")
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(own, [spec])
    started, release = asyncio.Event(), asyncio.Event()

    async def handle(event: Any, delivery: Delivery) -> None:
        started.set()
        await release.wait()

    worker: Worker[Any] = Worker(own, spec, handle, parse=make_ping(0).model_validate_json)
    running = asyncio.create_task(worker.run())
    await own.publish(make_ping(1))
    await asyncio.wait_for(started.wait(), 10)
    closing = asyncio.ensure_future(own.close())
    await asyncio.sleep(0.05)  # give a broken close() the chance to drain under the handler
    assert not closing.done()
    release.set()
    await asyncio.wait_for(closing, 10)
    assert running.done()
    assert own.nc.is_closed
    checker = await connect(nats_server.url, name="checker")
    try:
        assert await consumer_settled(checker, "svc"), "the in-flight message was not acked"
    finally:
        await checker.close()


@pytest.mark.parametrize(
    ("subject", "run_id"),
    [
        ("sreforge.run.20261129-080000-abc123.BriefReady", "20261129-080000-abc123"),
        ("sreforge.run.run-0001.test.ping", "run-0001"),
        ("sreforge.run.start", None),
        ("sreforge.trigger.fired", None),
        ("sreforge.run.r1.test.ping", None),
        ("sreforge.run.Not_A_Run.BriefReady", None),
    ],
)
def test_the_run_of_a_subject_is_named_only_for_run_events(
    subject: str, run_id: str | None
) -> None:
    """Only `sreforge.run.<valid run id>.<Type>` names a run; commands and triggers do not."""
    assert run_of_subject(subject) == run_id


async def test_an_oversize_message_is_dead_lettered_without_its_body_and_the_bus_stays_up(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """A ~1 MB body (as a foreign client can store it) is refused unparsed; its dead letter
    leaves the body out, so it cannot exceed the server's max payload and close our connection.
    """
    spec = ConsumerSpec("svc", (PINGS,))
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()
    parsed: list[int] = []

    def parse(data: bytes) -> Any:
        parsed.append(len(data))
        return Ping.model_validate_json(data)

    async def handle(event: Any, delivery: Delivery) -> None:
        seen.add(event, delivery)

    start_worker(spec, handle, parse=parse)
    subject = "sreforge.run.r1.test.ping"
    huge = b'{"n": 1, "pad": "' + b"x" * 1_000_000 + b'"}'
    await bus.js.publish(subject, huge)  # past our own guard, like `nats pub`
    await bus.publish(make_ping(2))
    await seen.wait_for(1)
    assert [event.n for event, _, _ in seen.items] == [2]
    assert len(huge) not in parsed, "an oversize body must be refused before parsing"

    [dead] = await read_stream(bus, "sreforge.deadletter.svc", 1)
    assert dead.data == b""
    assert dead.headers[HEADER_DEADLETTER_BODY_DROPPED] == str(len(huge))
    assert f"over the limit of {MAX_MESSAGE_BYTES} bytes" in dead.headers[HEADER_DEADLETTER_ERROR]
    assert bus.nc.is_connected
    await poll(lambda: consumer_settled(bus, "svc"), "oversize terminated, good event acked")


async def test_a_dead_letter_that_would_outgrow_the_max_payload_drops_the_body(
    bus: Bus, make_ping: MakePing, start_worker: StartWorker
) -> None:
    """With no size limit in the worker, a failing ~1 MB message still dead-letters safely:
    the old worker re-published body plus headers over 1 MiB and the server cut it off."""
    spec = ConsumerSpec("svc", (PINGS,), max_deliver=1)
    await bootstrap(bus, [spec])
    seen: Seen[Any] = Seen()

    async def handle(event: Any, delivery: Delivery) -> None:
        if len(delivery.data) > MAX_MESSAGE_BYTES:
            raise RuntimeError("too big to handle")
        seen.add(event, delivery)

    start_worker(spec, handle, parse=lambda data: data, max_bytes=None)
    room = bus.nc.max_payload - 64
    await bus.js.publish("sreforge.run.r1.test.ping", b"x" * room)
    await bus.publish(make_ping(2))
    await seen.wait_for(1)
    [dead] = await read_stream(bus, "sreforge.deadletter.svc", 1)
    assert dead.data == b""
    assert dead.headers[HEADER_DEADLETTER_BODY_DROPPED] == str(room)
    assert "too big to handle" in dead.headers[HEADER_DEADLETTER_ERROR]
    assert bus.nc.is_connected
