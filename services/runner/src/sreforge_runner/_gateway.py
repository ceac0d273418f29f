"""The gateway: resolve → create sandbox → start → guard → dispatch → end → cleanup → destroy.

`resolve` binds a request to its catalog profile and readiness before anything
exists: an unknown or disabled profile, or a blocked one (its owner and evidence
in the refusal), is refused there. `drive` then runs the lifecycle; once the
sandbox exists, the rein's cleanup and the sandbox's destroy are attempted on
every path and reported separately. Every failure is kept and the first is the
primary. Given the run's `Tells`, a `host-sandboxed` or `in-box` sandbox is probed from inside
after the session starts and before the agent is dispatched (`_guard`); a tell there
stops the run at `session_start` and is the drive's `guard_hit` (the run's abort
reason). The evidence is safe to publish: no prompt, output or secret value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from sreforge_contracts import (
    ExecutionEvidence,
    ExecutionRequest,
    FailureStage,
    GatewayResult,
    HarnessProfile,
    ResolvedExecutionContext,
    StageError,
    Tells,
)

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._box import BoxSandbox
from sreforge_runner._catalog import find_profile
from sreforge_runner._errors import ContaminationFound, ProfileError, ProfileRefused
from sreforge_runner._guard import guard_sandbox
from sreforge_runner._process import Budgets
from sreforge_runner._readiness import effective_readiness
from sreforge_runner._reins import Dispatch, Rein
from sreforge_runner._sandbox import HostSandbox
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._transcript import model_usage, redact, route_secrets

__all__ = ["GatewayRun", "drive", "refusal", "resolve"]

T = TypeVar("T")
_MAX_NAMES = 20
"""Distinct names of reaped processes kept in the evidence (a fork bomb has thousands)."""


@dataclass(frozen=True)
class GatewayRun:
    """One drive: the contract's result, the rein's dispatch (if reached) and, when the
    contamination guard stopped it, the abort reason (tells and surfaces named)."""

    result: GatewayResult
    dispatch: Dispatch | None
    guard_hit: str | None = None

    @property
    def ok(self) -> bool:
        """True when every stage, cleanup and destroy included, succeeded."""
        return self.result.ok

    @property
    def primary(self) -> StageError | None:
        """The first failure, the one that explains the outcome."""
        failures = self.result.evidence.failures
        return failures[0] if failures else None


def resolve(request: ExecutionRequest, settings: RunnerSettings) -> ResolvedExecutionContext:
    """Bind `request` to its profile and readiness; `ProfileRefused` before any sandbox."""
    try:
        profile = find_profile(
            settings.agents_dir, request.harness_profile_ref, settings.installed_dir
        )
    except ProfileError as error:
        raise ProfileRefused(str(error), None) from error
    if profile.status == "disabled":
        raise ProfileRefused(f"agent {profile.name}: the profile is disabled", profile)
    readiness = effective_readiness(profile, settings)
    if readiness.state == "blocked":
        raise ProfileRefused(
            f"agent {profile.name}: blocked (owner: {readiness.owner}; "
            f"evidence: {readiness.evidence})",
            profile,
        )
    return ResolvedExecutionContext(
        request_id=request.request_id,
        profile=profile,
        readiness=readiness,
        proof_run=readiness.state == "unverified",
    )


def refusal(request: ExecutionRequest, refused: ProfileRefused) -> GatewayResult:
    """The result of a request refused at resolution (no sandbox was created)."""
    profile = refused.profile
    evidence = ExecutionEvidence(
        request_id=request.request_id,
        profile=request.harness_profile_ref,
        rein=profile.rein if profile else None,
        model=profile.model if profile else None,
        sandbox_requested=profile.sandbox if profile else None,
        outcome="refused",
        failure_stage="resolution",
        failures=(StageError(stage="resolution", error=f"ProfileRefused: {refused}"),),
    )
    return GatewayResult(ok=False, evidence=evidence, tool_error=str(refused))


async def drive(
    context: ResolvedExecutionContext,
    rein: Rein,
    sandbox: AgentSandbox,
    budgets: Budgets,
    tells: Tells | None = None,
) -> GatewayRun:
    """Run `rein` in `sandbox` within `budgets`; cleanup and destroy are always attempted.
    With `tells`, a confined sandbox is guarded before the agent is dispatched."""
    started = datetime.now(UTC)
    failures: list[StageError] = []
    guard_hit: str | None = None

    async def step(stage: FailureStage, action: Callable[[], Awaitable[T]]) -> T | None:
        try:
            return await action()
        except Exception as error:
            failures.append(StageError(stage=stage, error=f"{type(error).__name__}: {error}"))
            return None

    # Off the event loop: a bwrap probe or an ssh round trip blocks for seconds.
    async def create() -> bool:
        await asyncio.to_thread(sandbox.create)
        return True

    async def destroy() -> bool:
        await asyncio.to_thread(sandbox.destroy)
        return True

    async def guard() -> bool:
        nonlocal guard_hit
        probed = sandbox if isinstance(sandbox, (HostSandbox, BoxSandbox)) else None
        if tells is None or probed is None or not probed.confined:
            return True
        guard_hit = await guard_sandbox(probed, tells, rein.session_env)
        if guard_hit is not None:
            raise ContaminationFound(guard_hit)
        return True

    dispatch: Dispatch | None = None
    teardown: dict[str, object] = {}
    try:
        if (
            await step("sandbox_create", create)
            and await step("session_start", lambda: _true(rein.start_session(sandbox)))
            and await step("session_start", guard)
        ):
            dispatch = await step("execution", lambda: rein.dispatch(sandbox, budgets))
            if dispatch is not None:
                failures.extend(_dispatch_failures(dispatch))
                await step("session_end", lambda: _true(rein.end_session(sandbox)))
    finally:
        # A half-created sandbox is torn down too; the rein's cleanup tolerates no session.
        cleaned = await step("teardown", lambda: _true(rein.cleanup_session(sandbox)))
        teardown["survivors"] = len(await asyncio.to_thread(sandbox.settled_survivors))
        teardown["reaped"] = None if sandbox.reaped is None else len(sandbox.reaped)
        destroyed = await step("teardown", destroy)
        teardown["session_cleanup"] = "succeeded" if cleaned else "failed"
        teardown["sandbox_destroy"] = "succeeded" if destroyed else "failed"
    secrets = route_secrets(context.profile.credential_routes)
    failures[:] = [StageError(stage=f.stage, error=redact(f.error, secrets)[0]) for f in failures]
    if guard_hit is not None:
        guard_hit = redact(guard_hit, secrets)[0]
    evidence = _evidence(context, sandbox, dispatch, failures, started, budgets, teardown)
    result = GatewayResult(
        ok=not failures,
        evidence=evidence,
        tool_error=failures[0].error if failures else None,
    )
    return GatewayRun(result=result, dispatch=dispatch, guard_hit=guard_hit)


async def _true(action: Awaitable[None]) -> bool:
    await action
    return True


def _dispatch_failures(dispatch: Dispatch) -> list[StageError]:
    if dispatch.timeout == "session_start":
        return [
            StageError(stage="session_start", error="Timeout: no output before session_start_s")
        ]
    if dispatch.timeout is not None:
        return [
            StageError(stage="execution", error=f"Timeout: the {dispatch.timeout} budget fired")
        ]
    if dispatch.exit_code not in (None, 0):
        return [StageError(stage="execution", error=f"AgentExit: exit code {dispatch.exit_code}")]
    return []


def _evidence(
    context: ResolvedExecutionContext,
    sandbox: AgentSandbox,
    dispatch: Dispatch | None,
    failures: list[StageError],
    started: datetime,
    budgets: Budgets,
    teardown: dict[str, object],
) -> ExecutionEvidence:
    profile: HarnessProfile = context.profile
    metadata: dict[str, object] = {"budget_total_s": budgets.total_s}
    if sandbox.downgrade:
        metadata["sandbox_downgrade"] = sandbox.downgrade
    if sandbox.reaped:
        metadata["reaped_processes"] = sorted(set(sandbox.reaped))[:_MAX_NAMES]
    usage = model_usage(sandbox.root, profile.metadata)
    if usage is not None:
        metadata["model_usage"] = usage
    metadata.update(sandbox.network_metadata())
    return ExecutionEvidence.model_validate(
        {
            "request_id": context.request_id,
            "profile": profile.name,
            "rein": profile.rein,
            "model": profile.model,
            "readiness": context.readiness.state,
            "proof_run": context.proof_run,
            "sandbox_requested": sandbox.kind,
            "confinement": sandbox.confinement,
            "outcome": "failed" if failures else "succeeded",
            "failure_stage": failures[0].stage if failures else None,
            "failures": failures,
            "timeout": dispatch.timeout if dispatch else None,
            "limits": profile.limits,
            "exit_code": dispatch.exit_code if dispatch else None,
            "stop_reason": dispatch.stop_reason if dispatch else None,
            "duration_ms": dispatch.duration_ms if dispatch else None,
            "started_at": started,
            "finished_at": datetime.now(UTC),
            "metadata": metadata,
            **teardown,
        }
    )
