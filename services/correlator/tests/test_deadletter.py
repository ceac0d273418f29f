"""Dead letters of run-scoped work end the run with verdict error, on a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from sreforge_bus import (
    HEADER_DEADLETTER_BODY_DROPPED,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_ERROR,
    HEADER_DEADLETTER_RUN_ID,
    HEADER_DEADLETTER_SUBJECT,
    STREAM,
    Bus,
    ConsumerSpec,
    Context,
    Route,
    Service,
    bootstrap,
)
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import (
    MAX_MESSAGE_BYTES,
    Event,
    RunFailed,
    TriggerFired,
    default_use_cases,
    parse_event,
    parse_run_record,
    utcnow,
)
from sreforge_contracts.schemas import SCHEMA_DIR
from sreforge_correlator import CorrelatorService, CorrelatorSettings, DeadLetter, RunLedger
from sreforge_recorder import RecorderSettings, recorder_service

from .conftest import RUN_ID, alert, brief_ready, requested, run_state, start_run

pytestmark = pytest.mark.integration

BROKEN = "brief-renderer"
"""The durable of a test service whose handler always raises (a stand-in for any stage)."""

StartBroken = Callable[[str, tuple[str, ...]], Awaitable[None]]


async def _explode(event: Event, context: Context) -> Sequence[Event]:
    raise RuntimeError(f"renderer exploded on {event.type}")


@pytest.fixture
async def start_broken(bus: Bus) -> AsyncIterator[StartBroken]:
    """Start a service whose handler always raises on `subjects` (2 deliveries, 50 ms apart)."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(durable: str, subjects: tuple[str, ...]) -> None:
        spec = ConsumerSpec(durable, subjects, max_deliver=2, backoff=(0.05,))
        await bootstrap(bus, [spec])
        service = Service(name=durable, routes=(Route(spec, _explode, parse_event),))
        stop = asyncio.Event()
        running.append((stop, asyncio.create_task(service.run(bus, stop))))

    yield start
    for stop, task in running:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _stored(bus: Bus, subject: str) -> int:
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    return sum((info.state.subjects or {}).values())


async def _handled_up_to(bus: Bus, durable: str, seq: int) -> None:
    async def handled() -> bool:
        info = await bus.js.consumer_info(STREAM, durable)
        return info.ack_floor.stream_seq >= seq and await consumer_settled(bus, durable)

    await poll(handled, f"{durable} to handle stream message {seq}")


async def test_a_handler_that_keeps_failing_on_a_brief_fails_the_run_with_error(
    bus: Bus, correlator: CorrelatorService, start_broken: StartBroken, tmp_path: Path
) -> None:
    """BriefReady dead-lettered: RunFailed{stage=durable, error} naming the service, the event
    and the last error; the run is terminal, and the recorder writes one `error` record."""
    settings = RecorderSettings(
        runs_dir=tmp_path / "runs",
        records_root=tmp_path / "use-cases",
        store_dir=tmp_path / "store",
        schema_path=SCHEMA_DIR / "run-record.v1.schema.json",
    )
    recorder = recorder_service(settings)
    await bootstrap(bus, [route.consumer for route in recorder.routes])
    stop_recorder = asyncio.Event()
    recording = asyncio.create_task(recorder.run(bus, stop_recorder))
    try:
        await start_broken(BROKEN, ("sreforge.run.*.BriefReady",))
        reply = await start_run(bus)
        assert reply.run_id is not None
        run_id = reply.run_id
        await bus.publish(brief_ready(32, run_id=run_id))
        [message] = await read_stream(bus, f"sreforge.run.{run_id}.RunFailed", 1)
        failed = parse_event(message.data)
        assert isinstance(failed, RunFailed)
        assert (failed.stage, failed.verdict, failed.producer) == (BROKEN, "error", "correlator")
        assert failed.reason.startswith(f"{BROKEN} dead-lettered BriefReady (")
        assert "renderer exploded on BriefReady" in failed.reason
        state = await run_state(bus, run_id)
        assert state.terminal
        assert (state.phase, state.verdict) == ("failed", "error")
        assert state.failure == f"{BROKEN}: {failed.reason}"
        record_path = settings.runs_dir / run_id / "record.json"
        await poll(lambda: _exists(record_path), "the run's record", timeout=20)
        record = parse_run_record(record_path.read_text())
        assert record.verdict == "error"
        assert record.abort_reason == f"{BROKEN}: {failed.reason}"
        [dead] = await read_stream(bus, f"sreforge.deadletter.{BROKEN}", 1)
        assert dead.headers[HEADER_DEADLETTER_RUN_ID] == run_id
        await _handled_up_to(bus, "correlator-deadletters", dead.seq)
        await _handled_up_to(bus, "recorder", message.seq)
        assert await _stored(bus, f"sreforge.run.{run_id}.RunFailed") == 1
        assert await _stored(bus, f"sreforge.run.{run_id}.Scored") == 0
        assert await _stored(bus, f"sreforge.run.{run_id}.Recorded") == 1
    finally:
        stop_recorder.set()
        await asyncio.wait_for(recording, 15)


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def test_a_dead_lettered_trigger_fails_the_run_that_owns_its_route(
    bus: Bus, correlator: CorrelatorService, start_broken: StartBroken
) -> None:
    """A trigger carries no run id: its route leads the dead letter to its run."""
    await start_broken("pager", ("sreforge.trigger.fired",))
    reply = await start_run(bus)
    assert reply.run_id is not None
    route = (await run_state(bus, reply.run_id)).alert_route
    await bus.publish(TriggerFired(trigger=alert(route=route), producer="trigger"))
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunFailed", 1)
    failed = parse_event(message.data)
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("pager", "error")
    assert "pager dead-lettered TriggerFired" in failed.reason
    assert (await run_state(bus, reply.run_id)).phase == "failed"


async def test_a_dead_letter_without_a_run_is_only_logged_and_the_correlator_keeps_working(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """A malformed message and a dead letter of an unknown run fail nothing; a later dead
    letter of a live run still fails it."""
    reply = await start_run(bus)
    assert reply.run_id is not None
    run_id = reply.run_id
    await bus.publish_raw("sreforge.trigger.fired", b"{not json")
    [malformed] = await read_stream(bus, "sreforge.deadletter.correlator-triggers", 1)
    assert HEADER_DEADLETTER_RUN_ID not in malformed.headers
    unknown = brief_ready(32, run_id="no-such-run-1")
    await _dead_letter(bus, "stray", unknown, run_id="no-such-run-1")
    [stray] = await read_stream(bus, "sreforge.deadletter.stray", 1)
    await _handled_up_to(bus, "correlator-deadletters", max(malformed.seq, stray.seq))
    assert await _stored(bus, "sreforge.run.*.RunFailed") == 0
    assert (await run_state(bus, run_id)).phase == "requested"

    await _dead_letter(bus, "stray", brief_ready(32, run_id=run_id), run_id=run_id)
    [message] = await read_stream(bus, f"sreforge.run.{run_id}.RunFailed", 1)
    failed = parse_event(message.data)
    assert isinstance(failed, RunFailed)
    assert failed.reason == "stray dead-lettered BriefReady (handler failed 5 times: boom)"


async def _dead_letter(bus: Bus, durable: str, event: Event, *, run_id: str) -> None:
    """Publish what a worker of `durable` publishes when it gives up on `event`."""
    headers = {
        HEADER_DEADLETTER_DURABLE: durable,
        HEADER_DEADLETTER_SUBJECT: event.subject,
        HEADER_DEADLETTER_ERROR: "handler failed 5 times: boom",
        HEADER_DEADLETTER_RUN_ID: run_id,
    }
    await bus.publish_raw(
        f"sreforge.deadletter.{durable}", event.model_dump_json().encode(), headers
    )


async def test_a_failure_left_unpublished_is_owed_again_and_an_ended_run_is_left_alone(
    bus: Bus,
) -> None:
    """Handled again (a crash before the publish), the same RunFailed comes back; a run
    that ended otherwise is not failed a second time."""
    service = CorrelatorService(settings=CorrelatorSettings(use_cases=default_use_cases()))
    handlers = service.correlator(bus)
    assert await RunLedger(bus.runs).create(requested())
    letter = _letter("runner")
    [first] = await handlers.dead_letter(letter, utcnow())
    [again] = await handlers.dead_letter(letter, utcnow())
    assert isinstance(first, RunFailed)
    assert isinstance(again, RunFailed)
    assert again.event_id == first.event_id == f"{RUN_ID}.RunFailed.deadletter.runner"
    assert again.reason == first.reason
    assert await handlers.dead_letter(_letter("oracle-brief"), utcnow()) == []

    scored = requested(run_id="scored-run-1").advance("scored", utcnow(), verdict="passed")
    assert await RunLedger(bus.runs).create(scored)
    ended = DeadLetter.read(b"{}", {HEADER_DEADLETTER_RUN_ID: "scored-run-1"}, "sreforge.x.y")
    assert await handlers.dead_letter(ended, utcnow()) == []
    assert (await run_state(bus, "scored-run-1")).verdict == "passed"


def _letter(durable: str, **headers: Any) -> DeadLetter:
    brief = brief_ready(32)
    found = {
        HEADER_DEADLETTER_DURABLE: durable,
        HEADER_DEADLETTER_SUBJECT: brief.subject,
        HEADER_DEADLETTER_ERROR: "handler failed 5 times: RuntimeError('boom')",
        **headers,
    }
    return DeadLetter.read(
        brief.model_dump_json().encode(), found, f"sreforge.deadletter.{durable}"
    )


def test_a_dead_letter_names_its_run_from_the_header_or_the_body() -> None:
    """Header first; a run event's own run id otherwise; nothing for a malformed body."""
    assert _letter("runner", **{HEADER_DEADLETTER_RUN_ID: "other-run-1"}).run_id == "other-run-1"
    assert _letter("runner").run_id == RUN_ID
    malformed = DeadLetter.read(b"{not json", {}, "sreforge.deadletter.correlator-triggers")
    assert (malformed.run_id, malformed.route, malformed.event_type) == (
        None,
        None,
        "malformed message",
    )
    assert malformed.durable == "correlator-triggers"
    assert malformed.error == "no error recorded"
    trigger = TriggerFired(trigger=alert(), producer="trigger").model_dump_json().encode()
    assert DeadLetter.read(trigger, {}, "sreforge.deadletter.pager").route == alert().route


@pytest.mark.timeout(60)
async def test_an_oversize_event_fails_its_run_without_a_larger_dead_letter(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """A ~1 MB event on a live run's subject (as `nats pub` can store it): dead-lettered
    unparsed with its body left out, and the run ends `error` with the limit named."""
    reply = await start_run(bus)
    assert reply.run_id is not None
    run_id = reply.run_id
    huge = b'{"type": "StackReady", "pad": "' + b"x" * 1_000_000 + b'"}'
    await bus.js.publish(f"sreforge.run.{run_id}.StackReady", huge)
    [message] = await read_stream(bus, f"sreforge.run.{run_id}.RunFailed", 1)
    failed = parse_event(message.data)
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("correlator-events", "error")
    assert f"over the limit of {MAX_MESSAGE_BYTES} bytes" in failed.reason
    [dead] = await read_stream(bus, "sreforge.deadletter.correlator-events", 1)
    assert dead.data == b""
    assert dead.headers[HEADER_DEADLETTER_BODY_DROPPED] == str(len(huge))
    assert bus.nc.is_connected
    assert (await start_run(bus)).accepted, "the engine keeps answering"
