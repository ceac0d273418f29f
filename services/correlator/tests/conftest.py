"""Sample runs, events and triggers for the correlator tests (one clock: T0)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sreforge_contracts import (
    FaultArmed,
    PhaseChange,
    RunState,
    StackReady,
    Trigger,
)
from sreforge_correlator import RunClock

T0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)
RUN_ID = "20261129-080000-abc123"
ROUTE = "0f3a9c2e7b1d4a6f8e0c2b4d6f8a1c3e"
EXPECTED = "BookshelfApiLatencyP99High"
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
