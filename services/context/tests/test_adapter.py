"""The context service on a real bus: RunTriggered → BriefReady once, or RunFailed on a leak."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sreforge_bus import STREAM, Bus, bootstrap
from sreforge_bus.testing import consumer_settled, poll
from sreforge_context import ContextSettings, build_service
from sreforge_contracts import (
    BriefReady,
    RunFailed,
    RunState,
    RunTriggered,
    Trigger,
    parse_event,
)

pytestmark = pytest.mark.integration

GitRepo = Callable[..., Path]
MakeState = Callable[..., RunState]


async def stored(bus: Bus, subject: str) -> list[bytes]:
    """Every message the stream holds on exactly `subject`, in order."""
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    sub = await bus.js.subscribe(subject, ordered_consumer=True)
    try:
        return [(await sub.next_msg(timeout=5)).data for _ in range(count)]
    finally:
        await sub.unsubscribe()


@pytest.fixture
async def context_service(bus: Bus, use_cases: Path) -> AsyncIterator[Bus]:
    """The context service running on `bus` over the test use-cases root."""
    service = build_service(ContextSettings(use_cases_root=use_cases))
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    yield bus
    stop.set()
    await asyncio.wait_for(task, 10)


def triggered(run_id: str) -> RunTriggered:
    """The correlator's RunTriggered for `run_id`."""
    fired = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    trigger = Trigger(source="alertmanager", alert_name="ShopCheckoutLatencyHigh", fired_at=fired)
    return RunTriggered(run_id=run_id, producer="correlator", trigger=trigger, alert_fired_at=fired)


async def handled_twice(bus: Bus, event: RunTriggered) -> None:
    """Deliver `event`, then again under another message id (a redelivery), and settle."""
    await bus.publish(event)
    await poll(lambda: consumer_settled(bus, "context"), "context to handle RunTriggered")
    data = event.model_dump_json().encode()
    await bus.publish_raw(event.subject, data, {"Nats-Msg-Id": f"{event.event_id}.again"})
    await poll(lambda: consumer_settled(bus, "context"), "context to handle the redelivery")


async def aborted_once(bus: Bus, state: RunState) -> RunFailed:
    """Put `state`, deliver its RunTriggered twice; the one RunFailed(aborted) it caused."""
    await bus.runs.put(state.run_id, state.model_dump_json().encode())
    await handled_twice(bus, triggered(state.run_id))
    failures = await stored(bus, f"sreforge.run.{state.run_id}.RunFailed")
    assert len(failures) == 1
    failed = parse_event(failures[0])
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("context", "aborted")
    return failed


async def test_run_triggered_yields_one_brief_even_when_redelivered(
    context_service: Bus, git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState
) -> None:
    """A clean run gets exactly one BriefReady carrying the page and the contract."""
    bus = context_service
    state = make_state(git_repo(clean_files), run_id="run-ctx-ok")
    await bus.runs.put(state.run_id, state.model_dump_json().encode())
    await handled_twice(bus, triggered(state.run_id))
    briefs = await stored(bus, f"sreforge.run.{state.run_id}.BriefReady")
    assert len(briefs) == 1
    brief = parse_event(briefs[0])
    assert isinstance(brief, BriefReady)
    assert brief.contract.scenario.run_id == state.run_id
    assert "## Services" in brief.page
    assert await stored(bus, f"sreforge.run.{state.run_id}.RunFailed") == []


async def test_a_planted_leak_fails_the_run_instead(
    context_service: Bus, git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState
) -> None:
    """A harness word in the workspace's history → RunFailed(aborted), no BriefReady."""
    bus = context_service
    files = {**clean_files, "docs/plan.md": "Fault arrives at 10:00.\n"}
    state = make_state(git_repo(files), run_id="run-ctx-leak")
    failed = await aborted_once(bus, state)
    assert "harness word 'fault' in workspace file docs/plan.md line 1" in failed.reason
    assert await stored(bus, f"sreforge.run.{state.run_id}.BriefReady") == []


async def test_a_run_already_briefed_is_left_alone(
    context_service: Bus, git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState
) -> None:
    """A late redelivery after the run moved on (the runner may have written its sentinel
    into the workspace) publishes nothing."""
    bus = context_service
    workspace = git_repo({**clean_files, "notes.md": "oracle\n"})
    state = make_state(workspace, run_id="run-ctx-late", phase="briefed")
    await bus.runs.put(state.run_id, state.model_dump_json().encode())
    await handled_twice(bus, triggered(state.run_id))
    assert await stored(bus, f"sreforge.run.{state.run_id}.RunFailed") == []
    assert await stored(bus, f"sreforge.run.{state.run_id}.BriefReady") == []


async def test_an_unknown_scenario_is_an_engine_error(
    context_service: Bus, git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState
) -> None:
    """A run whose scenario folder is gone fails at once with verdict error, naming it."""
    bus = context_service
    state = make_state(git_repo(clean_files), run_id="run-ctx-gone")
    state = state.model_copy(update={"scenario_id": "gone-away"})
    await bus.runs.put(state.run_id, state.model_dump_json().encode())
    await bus.publish(triggered(state.run_id))
    await poll(lambda: consumer_settled(bus, "context"), "context to handle RunTriggered")
    failures = await stored(bus, f"sreforge.run.{state.run_id}.RunFailed")
    assert len(failures) == 1
    failed = parse_event(failures[0])
    assert isinstance(failed, RunFailed)
    assert failed.verdict == "error"
    assert "'gone-away'" in failed.reason


async def test_a_telling_endpoint_aborts_the_run_before_hand_off(
    context_service: Bus,
    git_repo: GitRepo,
    clean_files: dict[str, str],
    make_state: MakeState,
    http_app: Callable[..., str],
) -> None:
    """The stack's API answering with a harness banner → RunFailed(aborted), reason from the
    guard naming the endpoint and the tell; no BriefReady."""
    bus = context_service
    state = make_state(git_repo(clean_files), run_id="run-ctx-banner")
    assert state.stack is not None
    endpoints = {**state.stack.agent_endpoints, "shop-api": http_app("sreforge-shop/0.1")}
    stack = state.stack.model_copy(update={"agent_endpoints": endpoints})
    state = state.model_copy(update={"stack": stack})
    failed = await aborted_once(bus, state)
    assert failed.reason.startswith("contamination guard:")
    assert "harness word 'sreforge' in endpoint shop-api / line" in failed.reason
    assert await stored(bus, f"sreforge.run.{state.run_id}.BriefReady") == []
