"""RunTriggered → BriefReady (or RunFailed): read the run, build the brief, leak-check it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from sreforge_bus import Context
from sreforge_contracts import (
    RUN_PHASES,
    BriefReady,
    Event,
    Leak,
    RunFailed,
    RunState,
    RunTriggered,
    Scenario,
    Surface,
    Tells,
    describe_leaks,
    find_leaks,
)

from sreforge_context._endpoints import Fetch, http_fetch
from sreforge_context._errors import (
    ContextError,
    RunStateMissing,
    ScenarioInvalid,
    ScenarioNotFound,
)
from sreforge_context._guard import guard_scan
from sreforge_context._page import build_contract, render_page
from sreforge_context._scenarios import find_scenario
from sreforge_context._settings import ContextSettings

__all__ = ["PRODUCER", "BriefHandler", "brief_for", "check_brief"]

PRODUCER = "context"
STAGE = "context"
_TRIGGERED = RUN_PHASES.index("triggered")


def check_brief(page: str, workspace: Sequence[Surface], tells: Tells) -> list[Leak]:
    """Tells on the page or anywhere in the workspace's surfaces."""
    return find_leaks([Surface("page", page), *workspace], tells)


def brief_for(
    state: RunState,
    scenario: Scenario,
    alert_fired_at: datetime,
    settings: ContextSettings,
    fetch: Fetch = http_fetch,
) -> BriefReady | RunFailed:
    """The brief for a triggered run, or RunFailed(aborted) naming what leaked and where.

    The guard reads the page, the workspace and what the agent's endpoints answer
    (through `fetch`); the sandbox is the runner's and is not known here yet.
    """
    stack = state.stack
    if stack is None or stack.run_workspace is None:
        raise RunStateMissing(f"run {state.run_id}: the run state has no stack workspace yet")
    if scenario.manifest.profile == "incident" and scenario.manifest.expected is None:
        raise ScenarioInvalid(
            f"scenario {scenario.id}: no [expected] alert; cannot brief an incident"
        )
    try:
        trigger_text = scenario.trigger_page.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioInvalid(f"scenario {scenario.id}: cannot read trigger.md: {error}") from None
    contract = build_contract(
        state,
        scenario.manifest,
        stack.run_workspace,
        alert_fired_at=alert_fired_at,
        submit_command=settings.submit_command,
        agent_workspace_path=settings.agent_workspace_path,
    )
    page = render_page(trigger_text, contract.agent_context, profile=scenario.manifest.profile)
    if settings.leak_check:
        tells = Tells.for_run(
            state.scenario_id,
            contract.alert_to_clear,
            contract.scenario.expected_alert,
            runtime_override=scenario.env.runtime_override if scenario.env else None,
        )
        leaks = guard_scan(
            tells,
            page=page,
            workspace=Path(stack.run_workspace.path),
            endpoints=stack.agent_endpoints,
            fetch=fetch,
        ).leaks
        if leaks:
            return _failed(state.run_id, describe_leaks(leaks), "aborted")
    return BriefReady(run_id=state.run_id, producer=PRODUCER, page=page, contract=contract)


def _failed(run_id: str, reason: str, verdict: Literal["aborted", "error"]) -> RunFailed:
    return RunFailed(run_id=run_id, producer=PRODUCER, stage=STAGE, reason=reason, verdict=verdict)


@dataclass
class BriefHandler:
    """The context route's handler; settings are read on first use unless given."""

    settings: ContextSettings | None = None
    max_deliver: int = 5
    fetch: Fetch = http_fetch
    _resolved: ContextSettings | None = field(default=None, init=False, repr=False)

    def resolved_settings(self) -> ContextSettings:
        """The settings in force (from the environment when none were given)."""
        if self._resolved is None:
            self._resolved = self.settings or ContextSettings()
        return self._resolved

    async def __call__(self, event: RunTriggered, context: Context) -> Sequence[Event]:
        """Handle one RunTriggered; retry while the run state lags, then fail the run."""
        try:
            return await self._brief(event, context)
        except (ScenarioNotFound, ScenarioInvalid) as error:
            return (_failed(event.run_id, str(error), "error"),)
        except ContextError as error:
            if context.delivery.num_delivered < self.max_deliver:
                raise
            return (_failed(event.run_id, f"{error} (after {self.max_deliver} attempts)", "error"),)

    async def _brief(self, event: RunTriggered, context: Context) -> Sequence[Event]:
        state = await context.run_state(event.run_id)
        if state is None:
            raise RunStateMissing(f"run {event.run_id}: no run state in KV")
        if state.terminal or RUN_PHASES.index(state.phase) > _TRIGGERED:
            context.log.info("brief.already_past", run_id=state.run_id, phase=state.phase)
            return ()
        if RUN_PHASES.index(state.phase) < _TRIGGERED:
            raise RunStateMissing(f"run {state.run_id}: run state still in phase {state.phase}")
        settings = self.resolved_settings()
        scenario = find_scenario(settings.use_cases_root, state.scenario_id)
        started = time.monotonic()
        outcome = await asyncio.to_thread(
            brief_for, state, scenario, event.alert_fired_at, settings, self.fetch
        )
        seconds = round(time.monotonic() - started, 3)
        context.log.info("brief.built", run_id=state.run_id, outcome=outcome.type, seconds=seconds)
        return (outcome,)
