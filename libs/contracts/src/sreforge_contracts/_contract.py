"""The run contract: what the context service hands the engine and the agent (seed 000)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from sreforge_contracts._base import Contract
from sreforge_contracts._ids import RunId, ScenarioId

__all__ = ["AgentContext", "EvalOnly", "Profile", "RunContract", "RunWorkspace", "ScenarioRef"]

Profile = Literal["incident", "patch"]
"""`incident`: live stack, behavioural oracle. `patch`: pinned commit, hidden tests."""


class RunWorkspace(Contract):
    """The host-side clone the engine operates on, and the service it redeploys."""

    path: str = Field(min_length=1)
    service: str = Field(min_length=1)


class AgentContext(Contract):
    """What the agent receives: endpoints (its own view), workspace and submit command."""

    services: dict[str, str]
    run_workspace: RunWorkspace
    workspace_path: str = "/workspace"
    submit_command: str = "submit"


class ScenarioRef(Contract):
    """Run metadata; `expected_alert` is engine-internal and never reaches the agent."""

    id: ScenarioId
    profile: Profile = "incident"
    run_id: RunId
    expected_alert: str | None = None
    alert_fired_at: datetime | None = None


class EvalOnly(Contract):
    """The oracle's inputs; never exposed to the agent."""

    alert_to_clear: str = Field(min_length=1)
    max_clear_time_seconds: float = Field(gt=0)
    sustained_clear_seconds: float = Field(gt=0)


class RunContract(Contract):
    """The whole run contract: `agent_context`, `scenario`, `eval_only`.

    A patch run has no alert to clear: its `eval_only` is None (its hidden tests are
    the scenario's `verify/`, which the CI gate reads itself).
    """

    agent_context: AgentContext
    scenario: ScenarioRef
    eval_only: EvalOnly | None

    @property
    def alert_to_clear(self) -> str:
        """`eval_only.alert_to_clear`, or "" for a patch run (nothing to clear)."""
        return self.eval_only.alert_to_clear if self.eval_only is not None else ""
