"""BriefReady → Submitted: claim the run, drive the agent, take the diff and the sentinel.

The profile is resolved first (an unknown agent fails the run before anything
exists). The claim (`runner.<run_id>` in the runs bucket, holding the base commit)
then makes the agent run at most once per run: a redelivered BriefReady finds the
claim and republishes the saved outcome (Submitted or RunFailed); if the runner died
mid-session, it kills what is left of the agent's group, then submits what the workspace
holds (stop reason `interrupted`) when the agent had already submitted, and otherwise
restarts the session from the hand-off state (the workspace reset to the base commit)
with the agent's budget (capped by the run's agent deadline), counted in the claim, the
evidence and `Submission.restarts`. A harness fault is never charged to the agent as
`failed`: past `MAX_RESTARTS` the run ends `error`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import JsonValue
from sreforge_bus import RUNNER_CLAIM, Context, once_key
from sreforge_contracts import (
    AGENT_DIR,
    BUILTIN_AGENTS,
    BriefReady,
    ContractError,
    Event,
    ExecutionRequest,
    ResolvedExecutionContext,
    RunFailed,
    RunState,
    Scenario,
    Submission,
    Submitted,
    Tells,
    find_scenario,
    parse_event,
)

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._catalog import find_profile
from sreforge_runner._cli_agent import CliAgentRein
from sreforge_runner._diff import head_commit, reset_workspace, workspace_diff
from sreforge_runner._errors import ProfileError, ProfileRefused, RunnerError
from sreforge_runner._fit import fit_submitted
from sreforge_runner._gateway import GatewayRun, drive, refusal, resolve
from sreforge_runner._kept import agent_exit, kept_files, seal_logs
from sreforge_runner._openai_rein import OpenAIRein
from sreforge_runner._placement import agent_page, place_session
from sreforge_runner._process import Budgets
from sreforge_runner._reins import Rein, resolve_rein
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._submit import read_sentinel
from sreforge_runner._transcript import TRANSCRIPT_FILE, route_secrets

__all__ = ["MAX_RESTARTS", "PRODUCER", "RunnerHandler", "claim_key"]

PRODUCER = "runner"
STAGE = "runner"
_OUTCOME = "outcome.json"
_MIN_BUDGET_S = 0.1
MAX_RESTARTS = 2
"""Agent sessions a runner crash may restart per run before the run ends `error`."""


def claim_key(run_id: str) -> str:
    """The runs-bucket key whose creation claims the run's agent session."""
    return once_key(RUNNER_CLAIM, run_id)


@dataclass
class RunnerHandler:
    """The runner route's handler; settings are read on first use unless given."""

    settings: RunnerSettings | None = None
    max_deliver: int = 5
    _resolved: RunnerSettings | None = field(default=None, init=False, repr=False)
    _active: dict[str, asyncio.Event] = field(default_factory=dict, init=False, repr=False)

    def resolved_settings(self) -> RunnerSettings:
        """The settings in force (from the environment when none were given)."""
        if self._resolved is None:
            self._resolved = self.settings or RunnerSettings()
        return self._resolved

    async def __call__(self, event: BriefReady, context: Context) -> Sequence[Event]:
        """Handle one BriefReady: at most one agent session per run, one Submitted."""
        try:
            outcome = await self._handoff(event, context)
        except RunnerError as error:
            return (_failed(event.run_id, str(error)),)
        return () if outcome is None else (outcome,)

    async def _handoff(self, event: BriefReady, context: Context) -> Event | None:
        state = await _run_state(context, event.run_id)
        if state.terminal:
            context.log.info("agent.skipped", run_id=event.run_id, phase=state.phase)
            return None
        settings = self.resolved_settings()
        workspace = Path(event.contract.agent_context.run_workspace.path)
        request = ExecutionRequest(
            request_id=event.run_id,
            harness_profile_ref=state.agent,
            repository=str(workspace),
            title=f"on-call page for run {event.run_id}",
            description=event.page,
            labels=state.labels,
        )
        try:
            resolved = resolve(request, settings)
        except ProfileRefused as refused:
            answer = refusal(request, refused)
            context.log.warning("agent.refused", run_id=event.run_id, agent=state.agent)
            return _failed(event.run_id, f"refused at resolution: {answer.tool_error}")
        scenario = _find_scenario(settings.use_cases_root, state.scenario_id)
        sandbox = place_session(
            resolved.profile, state.stack, workspace, _agent_dir(state, workspace), settings
        )
        page = agent_page(event.page, state.stack, sandbox)
        rein = _rein(resolved, state, scenario, settings, page)
        budgets = _budgets(resolved, state, settings)
        base = await asyncio.to_thread(head_commit, workspace)
        claim = json.dumps({"base_commit": base, "agent": state.agent, "at": _now()})
        once = context.once(RUNNER_CLAIM, event.run_id)
        session = _Session(resolved, rein, sandbox, budgets, _tells(event, state, scenario))
        if await once.claim(claim.encode()):
            return await self._drive(event.run_id, state.agent, base, session, context)
        in_flight = self._active.get(event.run_id)
        if in_flight is not None:  # a duplicate delivery while this runner drives the agent
            await in_flight.wait()
        saved = sandbox.root / _OUTCOME
        if saved.is_file():
            context.log.info("agent.republish", run_id=event.run_id)
            return parse_event(saved.read_bytes())
        claimed = await once.value()
        record = json.loads(claimed) if claimed else {}
        sandbox.kill_leftovers()
        agent = str(record.get("agent", state.agent))
        base = str(record.get("base_commit") or base)
        if read_sentinel(sandbox.workspace, sandbox.settings.max_rca_bytes) is not None:
            context.log.error(
                "agent.interrupted", run_id=event.run_id, agent=agent, submitted=True,
                reason="the runner died after the agent submitted: submitting what it left",
            )  # fmt: skip
            secrets = _route_secrets_of(sandbox.settings, agent)
            return await asyncio.to_thread(
                _outcome, event.run_id, agent, sandbox, base, None, secrets
            )
        restarts = int(record.get("restarts", 0)) + 1
        if restarts > MAX_RESTARTS:
            reason = (
                f"agent {agent}: the runner was interrupted mid-session {restarts} times "
                f"before it submitted; not restarting it again"
            )
            context.log.error("agent.gave_up", run_id=event.run_id, agent=agent, reason=reason)
            return _failed(event.run_id, reason)
        # The harness cut the session short: grading what it left would charge the
        # harness's fault to the agent, so the session starts again from the hand-off.
        await once.record(json.dumps({**record, "restarts": restarts, "at": _now()}).encode())
        await asyncio.to_thread(reset_workspace, sandbox.workspace, base)
        context.log.error(
            "agent.restarted", run_id=event.run_id, agent=agent, restarts=restarts,
            reason="the runner died mid-session before the agent submitted",
        )  # fmt: skip
        return await self._drive(event.run_id, agent, base, session, context, restarts)

    async def _drive(
        self,
        run_id: str,
        agent: str,
        base: str,
        session: _Session,
        context: Context,
        restarts: int = 0,
    ) -> Event:
        """One agent session: drive it, collect and save its outcome (a redelivery
        republishes that instead of running the agent again)."""
        sandbox = session.sandbox
        done = self._active[run_id] = asyncio.Event()
        try:
            sandbox.root.mkdir(parents=True, exist_ok=True)
            context.log.info("agent.start", run_id=run_id, agent=agent, base=base)
            result = await drive(
                session.resolved, session.rein, sandbox, session.budgets, session.tells
            )
            secrets = route_secrets(session.resolved.profile.credential_routes)
            outcome = await asyncio.to_thread(
                _outcome, run_id, agent, sandbox, base, result, secrets, restarts
            )
            (sandbox.root / _OUTCOME).write_text(outcome.model_dump_json())
        finally:
            done.set()
            del self._active[run_id]
        context.log.info("agent.done", run_id=run_id, outcome=outcome.type, restarts=restarts)
        return outcome


@dataclass(frozen=True)
class _Session:
    """What one agent session is driven with."""

    resolved: ResolvedExecutionContext
    rein: Rein
    sandbox: AgentSandbox
    budgets: Budgets
    tells: Tells


def _rein(
    context: ResolvedExecutionContext,
    state: RunState,
    scenario: Scenario | None,
    settings: RunnerSettings,
    page: str,
) -> Rein:
    profile = context.profile
    if profile.rein == "command":
        return CliAgentRein(profile, page, run_id=context.request_id)
    if profile.rein == "openai":
        return OpenAIRein(profile, page, run_id=context.request_id)
    return resolve_rein(state.agent, state.labels, scenario, settings)


def _route_secrets_of(settings: RunnerSettings, agent: str) -> dict[str, str]:
    """The credential values of the agent's profile, when it is still in the catalog."""
    try:
        profile = find_profile(settings.agents_dir, agent, settings.installed_dir)
        return route_secrets(profile.credential_routes)
    except ProfileError:
        return {}


def _outcome(
    run_id: str,
    agent: str,
    sandbox: AgentSandbox,
    base: str,
    result: GatewayRun | None,
    secrets: dict[str, str],
    restarts: int = 0,
) -> Submitted | RunFailed:
    if result is not None and result.guard_hit is not None:  # the agent never started
        return _failed(run_id, result.guard_hit, "aborted")
    if result is not None and result.dispatch is None:
        primary = result.primary
        where = f"{primary.stage}: {primary.error}" if primary else "no dispatch"
        return _failed(run_id, f"agent {agent}: the gateway failed at {where}")
    try:
        submission = _collect(agent, sandbox, base, result, secrets)
    except RunnerError as error:
        return _failed(run_id, f"agent {agent}: {error}")
    if restarts:
        evidence = {**submission.evidence, "restarts": restarts}
        submission = submission.model_copy(update={"restarts": restarts, "evidence": evidence})
    return fit_submitted(Submitted(run_id=run_id, producer=PRODUCER, submission=submission))


def _collect(
    agent: str,
    sandbox: AgentSandbox,
    base: str,
    result: GatewayRun | None,
    secrets: dict[str, str],
) -> Submission:
    sentinel = read_sentinel(sandbox.workspace, sandbox.settings.max_rca_bytes)
    dispatch = result.dispatch if result else None
    evidence = _published(result) if result else {"rein": agent, "interrupted": True}
    seal_logs(sandbox.root, secrets)  # again for reins that seal nothing (built-ins, interrupted)
    kept = kept_files(sandbox.root)
    ended = agent_exit(
        sandbox.transcript_path,
        dispatch.exit_code if dispatch else None,
        dispatch.timeout if dispatch else None,
    )
    return Submission(
        agent_name=agent,
        transcript_ref=f"{AGENT_DIR}/{TRANSCRIPT_FILE}" if TRANSCRIPT_FILE in kept else None,
        diff=workspace_diff(sandbox.workspace, base),
        submitted=sentinel is not None,
        rca=sentinel.rca if sentinel else None,
        duration_ms=dispatch.duration_ms if dispatch else 0.0,
        stop_reason=dispatch.stop_reason if dispatch else "interrupted",
        evidence={**evidence, "base_commit": base},
        agent_dir=str(sandbox.root.resolve()),
        agent_files=kept,
        agent_exit=ended,
    )


async def _run_state(context: Context, run_id: str) -> RunState:
    state = await context.run_state(run_id)
    if state is None:
        raise RunnerError(f"run {run_id}: no run state in KV")
    return state


def _agent_dir(state: RunState, workspace: Path) -> Path:
    run_dir = Path(state.stack.run_dir) if state.stack else workspace.parent
    return run_dir / AGENT_DIR


def _published(result: GatewayRun) -> dict[str, JsonValue]:
    """The evidence as the submission carries it (plus the pre-contract keys)."""
    evidence = result.result.evidence
    body: dict[str, JsonValue] = evidence.model_dump(mode="json")
    body.update(
        gateway_ok=result.ok,
        budget_seconds=evidence.metadata.get("budget_total_s"),
    )
    return body


def _budgets(
    context: ResolvedExecutionContext, state: RunState, settings: RunnerSettings
) -> Budgets:
    """The profile's limits; the total is the label's budget, else the rein kind's
    (built-ins: `rein_budget_seconds`), never past the run's agent deadline."""
    limits = context.profile.limits
    raw = state.labels.get("budget_seconds")
    if raw:
        try:
            total = float(raw)
        except ValueError:
            raise RunnerError(f"run label budget_seconds: {raw!r} is not a number") from None
    elif context.profile.rein in BUILTIN_AGENTS:
        total = settings.rein_budget_seconds
    else:
        total = min(limits.total_s, settings.agent_budget_seconds)
    if state.agent_deadline is not None:
        remaining = (state.agent_deadline - datetime.now(UTC)).total_seconds()
        total = min(total, max(remaining, _MIN_BUDGET_S))
    return Budgets(total_s=total, idle_s=limits.idle_s, session_start_s=limits.session_start_s)


def _tells(event: BriefReady, state: RunState, scenario: Scenario | None) -> Tells:
    """What the agent's sandbox must not show: the run's tells, as the context's guard."""
    alert = event.contract.alert_to_clear
    override = scenario.env.runtime_override if scenario and scenario.env else None
    return Tells.for_run(state.scenario_id, alert, state.expected_alert, runtime_override=override)


def _find_scenario(root: Path, scenario_id: str) -> Scenario | None:
    try:
        return find_scenario(root, scenario_id)
    except ContractError:
        return None


def _failed(run_id: str, reason: str, verdict: Literal["aborted", "error"] = "error") -> RunFailed:
    return RunFailed(run_id=run_id, producer=PRODUCER, stage=STAGE, reason=reason, verdict=verdict)


def _now() -> str:
    return datetime.now(UTC).isoformat()
