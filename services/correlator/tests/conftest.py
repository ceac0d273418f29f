"""Sample runs, events and triggers for the correlator tests (one clock: T0)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sreforge_bus import Bus, bootstrap
from sreforge_contracts import (
    BriefReady,
    FaultArmed,
    PhaseChange,
    RunContract,
    RunStartReply,
    RunState,
    StackReady,
    Trigger,
    default_use_cases,
)
from sreforge_correlator import CorrelatorService, CorrelatorSettings, RunClock, RunLedger

T0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)
RUN_ID = "20261129-080000-abc123"
ROUTE = "0f3a9c2e7b1d4a6f8e0c2b4d6f8a1c3e"
EXPECTED = "BookshelfApiLatencyP99High"
SCENARIO = "latency-cache-stampede"
CLOCK = RunClock(
    confirm_fire_seconds=24.0, agent_budget_seconds=600.0, correlation_window_seconds=6.0
)


def at(seconds: float) -> datetime:
    """T0 plus `seconds`."""
    return T0 + timedelta(seconds=seconds)


def requested(run_id: str = RUN_ID, route: str = ROUTE) -> RunState:
    """A freshly accepted run at time scale 0.1."""
    return RunState(
        run_id=run_id,
        scenario_id="latency-cache-stampede",
        agent="reference",
        time_scale=0.1,
        alert_route=route,
        expected_alert=EXPECTED,
        history=[PhaseChange(phase="requested", at=T0)],
    )


def stack_ready(run_id: str = RUN_ID, seconds: float = 1) -> StackReady:
    """The deployer's StackReady."""
    return StackReady(
        run_id=run_id,
        producer="deployer",
        occurred_at=at(seconds),
        stack="bookshelf-flask",
        run_dir="/tmp/run",
        agent_endpoints={"prometheus": "http://127.0.0.1:9090"},
        operator_endpoints={"prometheus": "http://127.0.0.1:9090"},
    )


def fault_armed(run_id: str = RUN_ID, seconds: float = 2) -> FaultArmed:
    """The deployer's FaultArmed (armed at `seconds`)."""
    return FaultArmed(
        run_id=run_id,
        producer="deployer",
        occurred_at=at(seconds),
        armed_at=at(seconds),
        delivery_mode="arm-deploy-recent",
    )


def alert(
    name: str = EXPECTED,
    seconds: float = 10,
    route: str | None = ROUTE,
    status: str = "firing",
    **labels: str,
) -> Trigger:
    """An Alertmanager alert on `route`, fired at T0 + `seconds`."""
    return Trigger.model_validate(
        {
            "source": "alertmanager",
            "alert_name": name,
            "labels": {"alertname": name, "service": "bookshelf-api", **labels},
            "fired_at": at(seconds),
            "status": status,
            "route": route,
        }
    )


def brief_ready(seconds: float, run_id: str = RUN_ID) -> BriefReady:
    """The context's BriefReady for `run_id` at T0 + `seconds`."""
    contract = RunContract.model_validate(
        {
            "agent_context": {
                "services": {"api": "http://127.0.0.1:1"},
                "run_workspace": {"path": "/tmp/w", "service": "bookshelf-api"},
                "submit_command": "submit",
            },
            "scenario": {
                "id": "latency-cache-stampede",
                "profile": "incident",
                "run_id": run_id,
                "expected_alert": EXPECTED,
                "alert_fired_at": at(10).isoformat(),
            },
            "eval_only": {
                "alert_to_clear": EXPECTED,
                "max_clear_time_seconds": 60,
                "sustained_clear_seconds": 36,
            },
        }
    )
    return BriefReady(
        run_id=run_id, producer="context", occurred_at=at(seconds), page="# Page", contract=contract
    )


@pytest.fixture
async def correlator(bus: Bus) -> AsyncIterator[CorrelatorService]:
    """The correlator service serving `bus`, sweeping every 50 ms."""
    settings = CorrelatorSettings(
        use_cases=default_use_cases(), sweep_interval_seconds=0.05, confirm_fire_grace_seconds=0
    )
    service = CorrelatorService(settings=settings)
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def start_run(bus: Bus, **fields: object) -> RunStartReply:
    """Send `run.start` for the sample scenario (fields override) and return the reply."""
    body = {"scenario": SCENARIO, "agent": "reference", "time_scale": 0.1, **fields}
    answer = await bus.command("sreforge.run.start", json.dumps(body).encode(), timeout=10)
    return RunStartReply.model_validate_json(answer)


async def run_state(bus: Bus, run_id: str) -> RunState:
    """The run's state in KV (which must exist)."""
    state = await RunLedger(bus.runs).load(run_id)
    assert state is not None, f"no state for run {run_id}"
    return state
