"""Deciding a `run.start`, purely: the command body and a fixed plan in, a decision out."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sreforge_contracts import (
    SCENARIO_ID_PATTERN,
    ContractError,
    PhaseChange,
    RunRejected,
    RunRequested,
    RunStartReply,
    RunState,
    ScenarioManifest,
    check_message,
    new_run_id,
    parse_run_start,
)

from sreforge_correlator._errors import StartRejected
from sreforge_correlator._machine import PRODUCER

__all__ = [
    "AGENT_LABEL_PATTERN",
    "MAX_LABELS_CHARS",
    "Accepted",
    "ManifestLookup",
    "Rejected",
    "ScriptCheck",
    "StartDecision",
    "StartPlan",
    "decide_start",
    "duplicate_run",
    "new_plan",
]

AGENT_LABEL_PATTERN = r"^[a-z0-9][a-z0-9._-]*(:[a-z0-9][a-z0-9._-]*)?$"
"""`<profile>` or `<profile>:<name>` (`scripted:<fixture>`): plain names, no `/`, no `..`."""
_AGENT_LABEL = re.compile(AGENT_LABEL_PATTERN)
_MAX_REASON_CHARS = 4000
MAX_LABELS_CHARS = 16 * 1024
"""The most a run's labels may hold (keys plus values): they are copied into every state."""
_SCENARIO_ID = re.compile(SCENARIO_ID_PATTERN)

ManifestLookup = Callable[[str], ScenarioManifest]
"""Scenario id → manifest; raises `StartRejected` naming the field when there is none."""

ScriptCheck = Callable[[str, str], None]
"""(scenario id, name) → None when `scripted:<name>` resolves, else `StartRejected`."""


class StartPlan(BaseModel):
    """What one `run.start` message is decided with, fixed at its first delivery.

    Kept in KV (`start.<message>`), so a redelivered command reuses the same run
    id, alert route and time, and so re-announces the same run instead of a twin.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    alert_route: str
    at: datetime


def new_plan(now: datetime) -> StartPlan:
    """A fresh plan: a minted run id and an opaque route (random hex, no words in it)."""
    return StartPlan(run_id=new_run_id(now), alert_route=secrets.token_hex(16), at=now)


@dataclass(frozen=True)
class Accepted:
    """The run to create and the event announcing it."""

    state: RunState
    event: RunRequested

    @property
    def reply(self) -> RunStartReply:
        """`{accepted: true, run_id}`."""
        return RunStartReply(accepted=True, run_id=self.state.run_id)


@dataclass(frozen=True)
class Rejected:
    """The refusal, under a minted run id so the rejection gets its own record."""

    event: RunRejected

    @property
    def reason(self) -> str:
        """Why, naming the field at fault."""
        return self.event.reason

    @property
    def reply(self) -> RunStartReply:
        """`{accepted: false, run_id, error}`: the run id is where the rejection is recorded."""
        return RunStartReply(accepted=False, run_id=self.event.run_id, error=self.event.reason)


StartDecision = Accepted | Rejected


def decide_start(
    body: bytes,
    plan: StartPlan,
    lookup: ManifestLookup,
    agents: frozenset[str],
    scripts: ScriptCheck | None = None,
) -> StartDecision:
    """Validate a `run.start` body (size, ids, scenario, agent, time scale) and decide on it.

    Everything the sender controls is checked here, before any stack exists: an oversize
    or too deeply nested body, an agent label that could name a path (`scripted:../x`),
    and (given `scripts`) a `scripted:<name>` whose fixture the runner would not find.
    """
    try:
        start = parse_run_start(body)
    except ContractError as error:
        return _reject(plan, str(error), _scenario_named(body))
    labels_size = sum(len(key) + len(value) for key, value in start.labels.items())
    if labels_size > MAX_LABELS_CHARS:
        # The labels ride on RunRequested, the run state and the record: keep them small.
        reason = (
            f"run.start: labels: {labels_size} characters, over the limit of "
            f"{MAX_LABELS_CHARS} (MAX_LABELS_CHARS)"
        )
        return _reject(plan, reason, start.scenario)
    if not _AGENT_LABEL.fullmatch(start.agent) or ".." in start.agent:
        reason = (
            f"run.start: agent: {start.agent!r} is not an agent label (<profile> or "
            "<profile>:<name>, lowercase letters, digits, '.', '_' and '-'; no '/' or '..')"
        )
        return _reject(plan, reason, start.scenario)
    # `scripted:<fixture>` names a file for the scripted rein; the profile is `scripted`.
    if start.agent.partition(":")[0] not in agents:
        known = ", ".join(sorted(agents))
        reason = f"run.start: agent: unknown agent profile {start.agent!r} (known: {known})"
        return _reject(plan, reason, start.scenario)
    try:
        manifest = lookup(start.scenario)
        profile, _, name = start.agent.partition(":")
        if profile == "scripted" and name and scripts is not None:
            scripts(start.scenario, name)
    except StartRejected as error:
        return _reject(plan, f"run.start: {error}", start.scenario)
    run_id = start.run_id or plan.run_id
    state = RunState(
        run_id=run_id,
        scenario_id=start.scenario,
        agent=start.agent,
        time_scale=start.time_scale,
        labels=start.labels,
        alert_route=plan.alert_route,
        expected_alert=manifest.expected.alert if manifest.expected else None,
        history=[PhaseChange(phase="requested", at=plan.at)],
    )
    event = RunRequested(
        run_id=run_id,
        producer=PRODUCER,
        occurred_at=plan.at,
        scenario=start.scenario,
        agent=start.agent,
        time_scale=start.time_scale,
        labels=start.labels,
        alert_route=plan.alert_route,
        topology=start.topology,
    )
    return Accepted(state=state, event=event)


def duplicate_run(plan: StartPlan, accepted: Accepted) -> Rejected:
    """The refusal of a client-chosen run id that another run already holds."""
    reason = f"run.start: run_id: run {accepted.state.run_id!r} already exists"
    return _reject(plan, reason, accepted.state.scenario_id)


def _reject(plan: StartPlan, reason: str, scenario: str | None) -> Rejected:
    if len(reason) > _MAX_REASON_CHARS:  # the refusal must fit on the bus, whatever came in
        reason = reason[: _MAX_REASON_CHARS - 5] + " [...]"
    event = RunRejected(
        run_id=plan.run_id, producer=PRODUCER, occurred_at=plan.at, reason=reason, scenario=scenario
    )
    return Rejected(event=event)


def _scenario_named(body: bytes) -> str | None:
    """The `scenario` a malformed command asked for, if it named one at all."""
    try:
        check_message(body, "run.start")  # json.loads recurses: never on a too-deep body
        data = json.loads(body)
    except (ContractError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    scenario = data.get("scenario") if isinstance(data, dict) else None
    if not isinstance(scenario, str) or len(scenario) > 100:
        return None  # a 200 KB "scenario" must not ride along on the refusal
    return scenario if _SCENARIO_ID.fullmatch(scenario) else None
