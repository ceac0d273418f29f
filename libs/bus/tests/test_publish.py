"""Typed publish, Nats-Msg-Id dedupe, bootstrap and follow against a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from nats.js.api import StorageType
from sreforge_bus import STREAM, Bus, ConsumerSpec, MessageTooLarge, PublishError, bootstrap, follow
from sreforge_bus.testing import read_stream
from sreforge_contracts import MAX_MESSAGE_BYTES, Event

pytestmark = pytest.mark.integration

MakePing = Callable[..., Event]


async def test_publish_stores_the_event_on_its_subject(bus: Bus, make_ping: MakePing) -> None:
    """`publish` stores the event's JSON on `event.subject` with its id as `Nats-Msg-Id`."""
    event = make_ping(1)
    published = await bus.publish(event)
    assert (published.stream, published.seq, published.duplicate) == (STREAM, 1, False)
    [stored] = await read_stream(bus, "sreforge.>", 1)
    assert stored.subject == "sreforge.run.r1.test.ping"
    assert stored.headers["Nats-Msg-Id"] == "r1.ping.1"
    assert type(event).model_validate_json(stored.data) == event


async def test_republishing_the_same_event_is_deduplicated(bus: Bus, make_ping: MakePing) -> None:
    """A second publish of the same event id in the window is acked as duplicate, not stored."""
    first = await bus.publish(make_ping(7))
    again = await bus.publish(make_ping(7))
    other = await bus.publish(make_ping(8))
    assert (first.duplicate, again.duplicate, other.duplicate) == (False, True, False)
    info = await bus.js.stream_info(STREAM)
    assert info.state.messages == 2


async def test_publish_outside_the_stream_raises_publish_error(bus: Bus) -> None:
    """No stream captures the subject: the caller gets a PublishError naming the subject."""
    with pytest.raises(PublishError, match=r"elsewhere\.thing"):
        await bus.publish_raw("elsewhere.thing", b"{}")


async def test_bootstrap_is_idempotent_and_updates_consumers(bus: Bus, make_ping: MakePing) -> None:
    """Running bootstrap again changes nothing; a changed spec updates the durable in place."""
    spec = ConsumerSpec("svc", ("sreforge.run.>",), max_deliver=3)
    await bootstrap(bus, [spec])
    await bootstrap(bus, [spec])
    wider = ConsumerSpec("svc", ("sreforge.run.>", "sreforge.trigger.>"), max_deliver=6)
    await bootstrap(bus, [wider])
    consumer = await bus.js.consumer_info(STREAM, "svc")
    assert consumer.config.max_deliver == 7
    assert consumer.config.filter_subjects == ["sreforge.run.>", "sreforge.trigger.>"]
    stream = await bus.js.stream_info(STREAM)
    assert stream.config.subjects == ["sreforge.>"]
    assert stream.config.storage == StorageType.FILE
    assert stream.config.duplicate_window == 120
    assert await bus.runs.keys() == []


async def test_the_run_store_ages_out_like_the_stream(bus: Bus) -> None:
    """The runs bucket keeps an entry as long as the stream keeps events (7 days after its
    last write); a bucket made without that limit gets it at the next bootstrap."""
    backing = "KV_sreforge-runs"
    week = 7 * 24 * 3600
    assert (await bus.js.stream_info(backing)).config.max_age == week
    unlimited = (await bus.js.stream_info(backing)).config
    unlimited.max_age = 0
    await bus.js.update_stream(unlimited)
    assert (await bus.js.stream_info(backing)).config.max_age == 0
    await bootstrap(bus)
    assert (await bus.js.stream_info(backing)).config.max_age == week
    assert (await bus.js.stream_info(STREAM)).config.max_age == week


async def test_follow_replays_everything_then_tails_new_ones(bus: Bus, make_ping: MakePing) -> None:
    """`follow(deliver="all")` yields stored messages in order; "new" skips what was stored."""
    for n in range(3):
        await bus.publish(make_ping(n))
    replayed = await read_stream(bus, "sreforge.run.>", 3)
    assert [m.seq for m in replayed] == [1, 2, 3]

    tail = follow(bus, "sreforge.run.>", deliver="new")
    first = asyncio.ensure_future(anext(tail))
    # The consumer starts at "whatever comes next": publish fresh events until one shows up.
    for n in range(100, 150):
        await bus.publish(make_ping(n))
        await asyncio.wait({first}, timeout=0.2)
        if first.done():
            break
    assert first.done(), "follow(deliver='new') yielded nothing within 10s"
    assert first.result().seq >= 4
    await tail.aclose()


async def test_a_message_over_the_limit_is_refused_before_it_is_sent(bus: Bus) -> None:
    """The bus never sends what the server would answer by closing the connection."""
    subject = "sreforge.run.r1.test.ping"
    with pytest.raises(MessageTooLarge, match=f"over the limit of {MAX_MESSAGE_BYTES} bytes"):
        await bus.publish_raw(subject, b"x" * (MAX_MESSAGE_BYTES + 1))
    with pytest.raises(MessageTooLarge, match="max payload"):
        await bus.publish_raw(subject, b"x", {"Sreforge-Pad": "y" * bus.nc.max_payload})
    assert bus.nc.is_connected
    assert (await bus.publish_raw(subject, b"x" * MAX_MESSAGE_BYTES)).seq >= 1
