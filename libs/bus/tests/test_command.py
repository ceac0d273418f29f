"""Commands with a reply over JetStream, and the same subject fed by a plain `nats pub`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from sreforge_bus import (
    HEADER_REPLY_TO,
    STREAM,
    Bus,
    ConsumerSpec,
    Delivery,
    ReplyTimeout,
    bootstrap,
)
from sreforge_bus.testing import Seen, consumer_settled, poll

pytestmark = pytest.mark.integration

StartWorker = Callable[..., Any]
SUBJECT = "sreforge.test.start"


class Start(BaseModel):
    """A stand-in for the `run.start` command."""

    model_config = ConfigDict(extra="forbid")
    scenario: str


class Accepted(BaseModel):
    """A stand-in for the command's answer."""

    run_id: str


async def test_command_round_trip_and_plain_publish(bus: Bus, start_worker: StartWorker) -> None:
    """`bus.command` gets the consumer's answer; a core publish without reply is still consumed.

    Both land in the stream, so a `nats pub` of the command works like the request.
    """
    spec = ConsumerSpec("starter", (SUBJECT,))
    await bootstrap(bus, [spec])
    seen: Seen[Start] = Seen()

    async def handle(command: Start, delivery: Delivery) -> None:
        seen.add(command, delivery)
        await bus.reply(delivery, Accepted(run_id=f"run-{command.scenario}"))

    start_worker(spec, handle, parse=Start.model_validate_json)
    answer = await bus.command(SUBJECT, Start(scenario="a"), timeout=5)
    assert Accepted.model_validate_json(answer) == Accepted(run_id="run-a")

    await bus.nc.publish(SUBJECT, b'{"scenario": "b"}')  # what `nats pub` does
    await seen.wait_for(2)
    assert [(c.scenario, d.reply_to is None) for c, d, _ in seen.items] == [
        ("a", False),
        ("b", True),
    ]
    await poll(lambda: consumer_settled(bus, "starter"), "both commands acked")


async def test_unanswered_command_times_out_but_is_stored(bus: Bus) -> None:
    """With no consumer the command is still stored by the stream; the caller gets ReplyTimeout."""
    with pytest.raises(ReplyTimeout, match=r"sreforge\.test\.start"):
        await bus.command(SUBJECT, Start(scenario="a"), timeout=0.3)
    info = await bus.js.stream_info("SREFORGE")
    assert info.state.messages == 1


async def test_a_reply_to_that_is_not_an_inbox_is_never_answered(
    bus: Bus, start_worker: StartWorker
) -> None:
    """A sender's `Sreforge-Reply-To: sreforge.run.<id>.RunFailed` must not make the
    consumer store its answer on another run's subject."""
    spec = ConsumerSpec("starter", (SUBJECT,))
    await bootstrap(bus, [spec])
    seen: Seen[Start] = Seen()

    async def handle(command: Start, delivery: Delivery) -> None:
        await bus.reply(delivery, Accepted(run_id="forged"))
        seen.add(command, delivery)

    start_worker(spec, handle, parse=Start.model_validate_json)
    victim = "sreforge.run.victim-run.RunFailed"
    await bus.js.publish(SUBJECT, b'{"scenario": "a"}', headers={HEADER_REPLY_TO: victim})
    await seen.wait_for(1)
    await poll(lambda: consumer_settled(bus, "starter"), "the command acked")
    info = await bus.js.stream_info(STREAM, subjects_filter=victim)
    assert not info.state.subjects, "the answer was stored on the victim's subject"
