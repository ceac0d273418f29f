"""The correlator on a real bus: run.start request/reply, triggers joined by route, deadlines."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from sreforge_bus import HEADER_MSG_ID, HEADER_REPLY_TO, Bus
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import (
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunStart,
    RunStartReply,
    RunTriggered,
    TriggerFired,
    default_use_cases,
    parse_event,
    utcnow,
)
from sreforge_correlator import CorrelatorService, CorrelatorSettings, RunClock, RunLedger, fold

from .conftest import (
    EXPECTED,
    RUN_ID,
    SCENARIO,
    alert,
    fault_armed,
    requested,
    run_state,
    stack_ready,
    start_run,
)

pytestmark = pytest.mark.integration

DURABLES = (
    "correlator-commands",
    "correlator-events",
    "correlator-triggers",
    "correlator-deadletters",
)


async def _settled(bus: Bus) -> None:
    async def all_settled() -> bool:
        return all([await consumer_settled(bus, durable) for durable in DURABLES])

    await poll(all_settled, "the correlator's consumers to settle")


async def test_run_start_replies_with_the_run_id_and_announces_the_run(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """Accepted: the reply has the run id; RunRequested (with its route) is on the bus and in KV."""
    reply = await start_run(bus)
    assert reply.accepted, reply.error
    assert reply.run_id is not None
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunRequested", 1)
    event = parse_event(message.data)
    assert isinstance(event, RunRequested)
    assert (event.scenario, event.agent, event.time_scale) == (SCENARIO, "reference", 0.1)
    state = await run_state(bus, reply.run_id)
    assert state.alert_route == event.alert_route
    assert state.expected_alert == EXPECTED
    assert await RunLedger(bus.runs).run_of_route(event.alert_route) == reply.run_id


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"scenario": "Not A Scenario"}, "scenario:"),
        ({"scenario": "no-such-scenario"}, "scenario: no scenario 'no-such-scenario'"),
        ({"agent": "mystery-agent"}, "agent: unknown agent profile 'mystery-agent'"),
    ],
)
async def test_an_invalid_run_start_is_refused_with_a_reason_and_recorded(
    bus: Bus, correlator: CorrelatorService, fields: dict[str, object], expected: str
) -> None:
    """Refused: the reply names the field, and RunRejected (a minted run id) is on the bus."""
    reply = await start_run(bus, **fields)
    assert not reply.accepted
    assert reply.error is not None
    assert expected in reply.error
    assert reply.run_id is not None
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunRejected", 1)
    event = parse_event(message.data)
    assert isinstance(event, RunRejected)
    assert event.reason == reply.error
    assert await RunLedger(bus.runs).load(reply.run_id) is None


async def test_a_client_run_id_already_taken_is_refused(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """The second run.start with the same run_id is refused and the first run is untouched."""
    first = await start_run(bus, run_id="chosen-run-1")
    assert first.accepted
    second = await start_run(bus, run_id="chosen-run-1", agent="noop")
    assert not second.accepted
    assert second.error is not None
    assert "run_id: run 'chosen-run-1' already exists" in second.error
    assert second.run_id != "chosen-run-1"
    assert (await run_state(bus, "chosen-run-1")).agent == "reference"


async def test_a_plain_core_publish_of_run_start_creates_the_run(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """Like `nats pub sreforge.run.start '{...}'`: no reply inbox, the run is still created."""
    body = RunStart(scenario=SCENARIO, agent="noop", run_id="plain-pub-run")
    await bus.nc.publish("sreforge.run.start", body.model_dump_json().encode())
    [message] = await read_stream(bus, "sreforge.run.plain-pub-run.RunRequested", 1)
    assert isinstance(parse_event(message.data), RunRequested)


async def test_a_redelivered_run_start_creates_one_run(bus: Bus) -> None:
    """The same stored command handled twice yields the same run, not a twin."""
    service = CorrelatorService(settings=CorrelatorSettings(use_cases=default_use_cases()))
    handlers = service.correlator(bus)
    body = RunStart(scenario=SCENARIO, agent="noop").model_dump_json().encode()
    first = await handlers.start(body, "7-abc", utcnow())
    again = await handlers.start(body, "7-abc", utcnow())
    assert first.reply.accepted
    assert again == first
    runs = await RunLedger(bus.runs).run_ids()
    assert runs == [first.event.run_id]


async def _run_with_route(bus: Bus, time_scale: float = 0.1) -> tuple[str, str]:
    reply = await start_run(bus, time_scale=time_scale)
    assert reply.run_id is not None
    return reply.run_id, (await run_state(bus, reply.run_id)).alert_route


async def test_the_expected_alert_on_the_route_triggers_the_armed_run_once(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """TriggerFired twice, the first before FaultArmed: one RunTriggered, co-firing attached."""
    run_id, route = await _run_with_route(bus)
    now = utcnow()
    fired = TriggerFired(
        trigger=alert(route=route).model_copy(update={"fired_at": now}), producer="t"
    )
    other = alert("BookshelfUpstreamSlow", route=route).model_copy(update={"fired_at": now})
    await bus.publish(TriggerFired(trigger=other, producer="t"))

    async def remembered() -> bool:
        state = await run_state(bus, run_id)
        return any(s.alert_name == "BookshelfUpstreamSlow" for s in state.handoff_alerts)

    # Handlers run concurrently: a co-firing signal folded after the trigger is kept as a
    # late hand-off alert, not in the trigger's signals. This test is about the earlier one.
    await poll(remembered, "the co-firing signal to be remembered")
    await bus.publish(fired)
    await bus.publish(stack_ready(run_id))
    await bus.publish(fault_armed(run_id).model_copy(update={"armed_at": now}))
    await bus.publish_raw(fired.subject, fired.model_dump_json().encode(), {HEADER_MSG_ID: "dup-1"})
    [message] = await read_stream(bus, f"sreforge.run.{run_id}.RunTriggered", 1)
    await _settled(bus)
    triggered = parse_event(message.data)
    assert isinstance(triggered, RunTriggered)
    assert triggered.alert_fired_at == now
    assert triggered.trigger.received_at == fired.occurred_at, "when the page reached the engine"
    assert [s.alert_name for s in triggered.trigger.signals] == [EXPECTED, "BookshelfUpstreamSlow"]
    state = await run_state(bus, run_id)
    assert state.phase == "triggered"
    assert [change.phase for change in state.history].count("triggered") == 1
    info = await bus.js.stream_info(
        "SREFORGE", subjects_filter=f"sreforge.run.{run_id}.RunTriggered"
    )
    assert info.state.subjects == {f"sreforge.run.{run_id}.RunTriggered": 1}


async def test_a_trigger_on_an_unknown_route_is_ignored(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """A signal nobody owns is consumed without error and touches no run."""
    run_id, _ = await _run_with_route(bus)
    await bus.publish(TriggerFired(trigger=alert(route="f" * 32), producer="t"))
    await bus.publish(TriggerFired(trigger=alert(route=None), producer="t"))
    await _settled(bus)
    assert (await run_state(bus, run_id)).phase == "requested"


async def test_confirm_fire_deadline_aborts_an_armed_run(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """Armed, no alert within the scaled timeout: RunFailed{confirm-fire, aborted}; state failed."""
    run_id, _ = await _run_with_route(bus, time_scale=0.001)  # 240 s → 0.24 s
    await bus.publish(fault_armed(run_id).model_copy(update={"armed_at": utcnow()}))
    [message] = await read_stream(bus, f"sreforge.run.{run_id}.RunFailed", 1)
    failed = parse_event(message.data)
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("confirm-fire", "aborted")
    assert EXPECTED in failed.reason
    state = await run_state(bus, run_id)
    assert state.confirm_fire_deadline is not None
    assert state.armed_at is not None
    assert state.confirm_fire_deadline - state.armed_at == timedelta(seconds=0.24)

    async def failed_state() -> bool:
        return (await run_state(bus, run_id)).phase == "failed"

    await poll(failed_state, "the run to be failed in KV")


async def test_concurrent_transitions_of_one_run_all_land(bus: Bus) -> None:
    """Compare-and-swap with retry: racing writers lose no fact of the run."""
    ledger = RunLedger(bus.runs)
    assert await ledger.create(requested())
    clock = RunClock(confirm_fire_seconds=24, agent_budget_seconds=60, correlation_window_seconds=6)
    steps = [stack_ready(), fault_armed()] * 5
    await asyncio.gather(*(ledger.change(RUN_ID, lambda s, e=e: fold(s, e, clock)) for e in steps))
    state = await run_state(bus, RUN_ID)
    assert state.phase == "armed"
    assert state.stack is not None
    assert state.armed_at is not None
    phases = [change.phase for change in state.history]
    # StackReady folded after FaultArmed adds its facts but no step back in the history.
    assert phases in (["requested", "stack_ready", "armed"], ["requested", "armed"])


async def test_a_transition_left_unannounced_by_a_crash_is_announced_by_the_sweep(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """State says triggered but no RunTriggered was published: the sweep publishes it."""
    now = utcnow()
    trigger = alert().model_copy(update={"fired_at": now})
    state = requested().advance("triggered", now, trigger=trigger, alert_fired_at=now)
    assert await RunLedger(bus.runs).create(state)
    [message] = await read_stream(bus, f"sreforge.run.{RUN_ID}.RunTriggered", 1)
    event = parse_event(message.data)
    assert isinstance(event, RunTriggered)
    assert event.alert_fired_at == now


async def test_a_body_that_is_not_json_still_gets_an_answer(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """No dead letter and no silent timeout: the sender learns the body is malformed."""
    answer = await bus.command("sreforge.run.start", b"scenario=foo", timeout=10)
    reply = RunStartReply.model_validate_json(answer)
    assert not reply.accepted
    assert reply.error is not None
    assert "malformed JSON" in reply.error


async def test_a_recorded_run_forgets_its_scratch_keys_and_keeps_its_guards(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """After Recorded: route, runner claim and oracle scratch are gone; the run state and
    the keys that guard against late redeliveries stay; other runs are untouched."""
    run_id, route = await _run_with_route(bus)
    scratch = [
        f"runner.{run_id}",
        f"oracle.handoff.{run_id}",
        f"oracle.samples.{run_id}.0",
        f"oracle.samples.{run_id}.1",
    ]
    guards = [f"recorded.{run_id}", f"oracle.scored.{run_id}", f"deployer.cleanup.{run_id}"]
    others = ["oracle.samples.other-run-1.0", "runner.other-run-1"]
    for key in (*scratch, *guards, *others):
        await bus.runs.put(key, b"x")
    recorded = Recorded(
        run_id=run_id, producer="recorder", path="/r/record.json", sha256="a" * 64, verdict="error"
    )
    await bus.publish(recorded)

    async def forgotten() -> bool:
        return await bus.runs.get(f"route.{route}") is None

    await poll(forgotten, "the recorded run's route to be removed")
    await _settled(bus)
    assert (await run_state(bus, run_id)).phase == "recorded"
    for key in scratch:
        assert await bus.runs.get(key) is None, key
    for key in (*guards, *others):
        assert await bus.runs.get(key) is not None, key
    headers = {HEADER_MSG_ID: "recorded-again"}
    await bus.publish_raw(recorded.subject, recorded.model_dump_json().encode(), headers)
    await _settled(bus)
    assert await RunLedger(bus.runs).forget(await run_state(bus, run_id)) == []
    assert await RunLedger(bus.runs).run_ids() == [run_id]


async def _command_past_the_guard(bus: Bus, body: bytes) -> RunStartReply:
    """Send `run.start` as a foreign client can (`nats pub`), past our own size guard."""
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox, max_msgs=1)
    await bus.js.publish("sreforge.run.start", body, headers={HEADER_REPLY_TO: inbox})
    answer = await sub.next_msg(timeout=20)
    return RunStartReply.model_validate_json(answer.data)


@pytest.mark.timeout(60)
async def test_an_oversize_run_start_is_rejected_and_the_engine_keeps_answering(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """The ~1 MB run.start that once closed the engine's connection for good: now a
    RunRejected naming the limit, no dead letter, and the next run.start is accepted."""
    labels = {"pad": "x" * 1_000_000}  # a valid field: only its size is wrong
    body = json.dumps({"scenario": SCENARIO, "agent": "noop", "labels": labels})
    reply = await _command_past_the_guard(bus, body.encode())
    assert not reply.accepted
    assert reply.error is not None
    assert f"over the limit of {MAX_MESSAGE_BYTES} bytes" in reply.error
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunRejected", 1)
    assert isinstance(parse_event(message.data), RunRejected)
    assert bus.nc.is_connected
    after = await start_run(bus)
    assert after.accepted, after.error
    info = await bus.js.stream_info("SREFORGE", subjects_filter="sreforge.deadletter.>")
    assert not info.state.subjects, "the oversize command must not be re-published"


@pytest.mark.timeout(60)
async def test_a_deeply_nested_run_start_is_rejected_with_a_reply(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """100 000 levels of nesting: a RunRejected naming the depth limit, not a crashed handler."""
    depth = 100_000
    body = b'{"scenario": "latency-cache-stampede", "x": ' + b"[" * depth + b"]" * depth + b"}"
    reply = await _command_past_the_guard(bus, body)
    assert not reply.accepted
    assert reply.error is not None
    assert f"over the limit of {MAX_JSON_DEPTH}" in reply.error
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunRejected", 1)
    assert isinstance(parse_event(message.data), RunRejected)


async def test_a_path_like_agent_label_is_rejected_before_any_run_is_requested(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """`scripted:../../x` gets RunRejected; no RunRequested, so no stack is ever deployed."""
    reply = await start_run(bus, agent="scripted:../../x")
    assert not reply.accepted
    assert reply.error is not None
    assert "is not an agent label" in reply.error
    await _settled(bus)
    info = await bus.js.stream_info("SREFORGE", subjects_filter="sreforge.run.*.RunRequested")
    assert not info.state.subjects
