"""The run state the correlator keeps in KV (`sreforge-runs`, key = run id).

The correlator is its only writer (compare-and-swap on each transition); every other
service reads it to learn what earlier stages found: the stack's endpoints, the
trigger, the deadlines.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from sreforge_contracts._base import Contract
from sreforge_contracts._contract import RunWorkspace
from sreforge_contracts._ids import RunId, ScenarioId
from sreforge_contracts._record import Verdict
from sreforge_contracts._trigger import Trigger, TriggerSignal

__all__ = ["RUN_PHASES", "PhaseChange", "RunPhase", "RunState", "StackInfo"]

RunPhase = Literal[
    "requested",
    "stack_ready",
    "armed",
    "triggered",
    "briefed",
    "submitted",
    "ci_done",
    "deployed",
    "scored",
    "failed",
    "recorded",
]
RUN_PHASES: tuple[RunPhase, ...] = RunPhase.__args__  # type: ignore[attr-defined]
"""The phases in the order a run that goes the whole way passes them."""


class PhaseChange(Contract):
    """When the run entered a phase."""

    phase: RunPhase
    at: datetime


class StackInfo(Contract):
    """What the deployer reported in StackReady: where the run's stack lives."""

    stack: str = Field(min_length=1)
    run_dir: str = Field(min_length=1)
    agent_endpoints: dict[str, str]
    operator_endpoints: dict[str, str]
    run_workspace: RunWorkspace | None = None
    agent_network: str | None = None
    """The Docker network an `in-box` agent session joins (compose only)."""
    network_endpoints: dict[str, str] = Field(default_factory=dict)
    """The agent's endpoints as seen from inside `agent_network`."""


class RunState(Contract):
    """One run as the correlator tracks it; replaced whole on each transition."""

    run_id: RunId
    scenario_id: ScenarioId
    agent: str = Field(min_length=1)
    time_scale: float = Field(gt=0, le=1)
    labels: dict[str, str] = Field(default_factory=dict)
    alert_route: str
    expected_alert: str | None = None
    phase: RunPhase = "requested"
    history: list[PhaseChange] = Field(default_factory=list)
    confirm_fire_deadline: datetime | None = None
    agent_deadline: datetime | None = None
    stack: StackInfo | None = None
    armed_at: datetime | None = None
    base_commit: str | None = None
    trigger: Trigger | None = None
    alert_fired_at: datetime | None = None
    handoff_alerts: list[TriggerSignal] = Field(default_factory=list)
    deployed_at: datetime | None = None
    verdict: Verdict | None = None
    failure: str | None = None

    @property
    def terminal(self) -> bool:
        """True once the run has a verdict or failed: no further transition is taken."""
        return self.phase in ("scored", "failed", "recorded")

    def advance(self, phase: RunPhase, at: datetime, **changes: object) -> RunState:
        """A copy of this state in `phase`, with `changes` applied and the move logged."""
        history = [*self.history, PhaseChange(phase=phase, at=at)]
        return self.model_copy(update={"phase": phase, "history": history, **changes})
