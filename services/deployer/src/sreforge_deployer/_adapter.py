"""The deployer on the bus: stacks per run, the CI gate, merge + redeploy, cleanup.

Every blocking call (a stack's processes, git, the app's tests) runs in a thread: all
services share one event loop in the embedded engine. Stacks are child processes of
this process, kept in a registry by run id; stopping the service tears them all down.
Each stage is claimed once per run in KV (`deployer.<stage>.<run_id>`) and its events
stored there, so a redelivered input republishes them instead of acting twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

import structlog
from sreforge_bus import Bus, ConsumerSpec, Context, Route, Service
from sreforge_contracts import (
    CiResult,
    ContractError,
    Deployed,
    Event,
    Recorded,
    RunFailed,
    RunRequested,
    RunState,
    Scored,
    Submitted,
    parse_event,
)

from sreforge_deployer._ci import CiCheckout, CiRun, merge_and_checkout
from sreforge_deployer._cleanup import down_owned, down_recorded
from sreforge_deployer._confine import confinement_for
from sreforge_deployer._errors import LoadControlError
from sreforge_deployer._handlers import (
    PRODUCER,
    ArmFacts,
    StackFacts,
    ci_protection,
    ci_result,
    cleaned_up,
    deploy_failed,
    deployed,
    failure,
    fault_armed,
    find_scenario_dir,
    stack_ready,
)
from sreforge_deployer._ledger import StageLedger
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._stack import LocalStack

__all__ = [
    "CLEANUP_CONSUMER",
    "SCORED_CONSUMER",
    "SERVICE",
    "STACK_CONSUMER",
    "SUBMITTED_CONSUMER",
    "Deployer",
    "DeployerService",
    "deployer_service",
]

E = TypeVar("E", bound=Event)
Log = structlog.stdlib.BoundLogger

STACK_CONSUMER = ConsumerSpec("deployer-stack", ("sreforge.run.*.RunRequested",))
SUBMITTED_CONSUMER = ConsumerSpec("deployer-submitted", ("sreforge.run.*.Submitted",))
# Cleanup waits for the record, not the verdict: the recorder still reads the run's
# folder (the agent's transcript) when the verdict arrives.
CLEANUP_CONSUMER = ConsumerSpec("deployer-cleanup", ("sreforge.run.*.Recorded",))
# Nothing reads a stack's processes once the run is scored, so they stop then, while
# the record is written; the run dir and the verified teardown still wait for Recorded.
SCORED_CONSUMER = ConsumerSpec("deployer-scored", ("sreforge.run.*.Scored",))


class _CiTarget(NamedTuple):
    """Where CI checks a run's submission out from, and whose tests protect it."""

    workspace: Path
    base_commit: str
    scenario_id: str


@dataclass
class _Run:
    """A run's stack in this process; the lock orders provisioning, redeploy and cleanup."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    stack: LocalStack | None = None


class Deployer:
    """The deployer's handlers and its registry of live stacks (run id → LocalStack)."""

    def __init__(self, settings: DeployerSettings | None = None) -> None:
        self._settings = settings
        self._runs: dict[str, _Run] = {}

    @property
    def settings(self) -> DeployerSettings:
        """The settings in force (`SREFORGE_DEPLOYER_*`), read on first use."""
        if self._settings is None:
            self._settings = DeployerSettings()
        return self._settings

    def stacks(self) -> dict[str, LocalStack]:
        """The stacks this process owns right now, by run id."""
        return {rid: run.stack for rid, run in self._runs.items() if run.stack is not None}

    async def on_run_requested(self, event: RunRequested, context: Context) -> Sequence[Event]:
        """Provision the run's stack (StackReady), then arm it (FaultArmed); once per run."""
        runs = context.bus.runs
        ledger = StageLedger(runs, "stack", event.run_id)
        if not await ledger.claim():
            return await self._replay(ledger, event.run_id, "stack")
        if await runs.get(f"deployer.cleanup.{event.run_id}") is not None:
            context.log.info("deployer.skip_provision", run_id=event.run_id, reason="ended")
            await ledger.save([])
            return ()
        run = self._runs.setdefault(event.run_id, _Run())
        async with run.lock:
            try:
                events = await self._provision(event, run, context)
            except Exception as error:  # e.g. the bus refused StackReady: do not leave a stack
                await asyncio.to_thread(self._down, event.run_id, run)
                events = [failure(event.run_id, "stack", error, verdict="error")]
        await ledger.save(events)
        return events[-1:]  # StackReady (if any) went out before arming

    async def on_submitted(self, event: Submitted, context: Context) -> Sequence[Event]:
        """CI gate on a clean checkout (CiResult); green → merge and redeploy (Deployed)."""
        if not event.submission.submitted:
            return ()
        run_id = event.run_id
        if await context.bus.runs.get(f"deployer.cleanup.{run_id}") is not None:
            context.log.info("deployer.skip_ci", run_id=run_id, reason="run already cleaned up")
            return ()
        ci_ledger = StageLedger(context.bus.runs, "ci", run_id)
        if not await ci_ledger.claim():
            return await self._resume_after_ci(event, ci_ledger, context)
        where = await self._workspace_of(run_id, context)
        if isinstance(where, str):
            failed = RunFailed(
                run_id=run_id, producer=PRODUCER, stage="ci", reason=where, verdict="error"
            )
            await ci_ledger.save([failed])
            return [failed]
        confinement = confinement_for(self.settings.bwrap_path)
        checkout = CiCheckout(where.workspace, where.base_commit, confinement)
        try:
            try:
                diff = event.submission.diff
                gate = await asyncio.to_thread(self._gate, checkout, diff, where.scenario_id)
            except Exception as error:  # the gate itself broke (clone, disk): an engine error
                context.log.error("deployer.ci_failed", run_id=run_id, error=str(error))
                failed = failure(run_id, "ci", error, verdict="error")
                await ci_ledger.save([failed])
                return [failed]
            result = ci_result(run_id, gate)
            await context.bus.publish(result)
            await ci_ledger.save([result])
            if not gate.green or gate.tree is None:
                return ()
            return await self._deploy_once(run_id, checkout, gate.tree, context)
        finally:
            await asyncio.to_thread(checkout.close)

    def _gate(self, checkout: CiCheckout, diff: str, scenario_id: str) -> CiRun:
        settings = self.settings
        protection = ci_protection(settings.use_cases, scenario_id)
        return checkout.run(
            diff,
            settings.python,
            settings.ci_timeout_seconds,
            settings.ci_output_max_chars,
            protection,
        )

    async def on_recorded(self, event: Recorded, context: Context) -> Sequence[Event]:
        """Tear the run's stack down once its record is written, and verify (CleanedUp)."""
        run_id = event.run_id
        ledger = StageLedger(context.bus.runs, "cleanup", run_id)
        if not await ledger.claim():
            return await ledger.outcome() or ()
        run = self._runs.get(run_id)
        if run is not None:
            async with run.lock:
                remaining = await asyncio.to_thread(self._down, run_id, run)
            self._runs.pop(run_id, None)
        else:
            remaining = await asyncio.to_thread(self._down_elsewhere, run_id)
        done = cleaned_up(run_id, remaining)
        log = context.log.info if done.verified else context.log.error
        log("deployer.cleaned_up", run_id=run_id, leftovers=remaining)
        await ledger.save([done])
        return [done]

    async def on_scored(self, event: Scored, context: Context) -> Sequence[Event]:
        """Stop the scored run's processes early (no event: CleanedUp follows Recorded)."""
        run = self._runs.get(event.run_id)
        if run is not None:
            async with run.lock:
                if run.stack is not None:
                    await asyncio.to_thread(run.stack.stop_processes)
        return ()

    async def shutdown(self, log: Log) -> None:
        """Tear down every stack this process still owns (the engine is stopping)."""
        for run_id, run in list(self._runs.items()):
            async with run.lock:
                remaining = await asyncio.to_thread(self._down, run_id, run)
            self._runs.pop(run_id, None)
            log.info("deployer.shutdown_teardown", run_id=run_id, leftovers=remaining)

    async def _provision(self, event: RunRequested, run: _Run, context: Context) -> list[Event]:
        run_id = event.run_id
        try:
            stack = await asyncio.to_thread(self._new_stack, event)
            run.stack = stack
            await asyncio.to_thread(stack.up)
        except Exception as error:
            run.stack = None  # a failed up() has torn down what it started
            context.log.error("deployer.stack_failed", run_id=run_id, error=str(error))
            return [failure(run_id, "stack", error)]
        ready = stack_ready(run_id, _stack_facts(stack))
        await context.bus.publish(ready)
        try:
            base_commit = await asyncio.to_thread(stack.arm)
        except Exception as error:
            context.log.error("deployer.arm_failed", run_id=run_id, error=str(error))
            failed = failure(run_id, "arm", error)
            await asyncio.to_thread(self._down, run_id, run)
            return [ready, failed]
        assert stack.armed_at is not None
        facts = ArmFacts(stack.armed_at, base_commit, stack.fault_commit, stack.setup)
        return [ready, fault_armed(run_id, facts)]

    def _new_stack(self, event: RunRequested) -> LocalStack:
        settings = self.settings
        return LocalStack(
            find_scenario_dir(settings.use_cases, event.scenario),
            time_scale=event.time_scale,
            run_id=event.run_id,
            webhook_url=settings.alert_webhook_base,
            webhook_route=event.alert_route,
            webhook_token_file=settings.alert_token_file,
            settings=settings,
        )

    async def _resume_after_ci(
        self, event: Submitted, ledger: StageLedger, context: Context
    ) -> Sequence[Event]:
        """A redelivered Submitted: republish CI's outcome; finish a merge a crash cut short."""
        stored = await ledger.outcome()
        if stored is None:
            return await self._replay(ledger, event.run_id, "ci")
        ci = stored[0] if stored else None
        if not isinstance(ci, CiResult) or not ci.green:
            return stored
        deploy_ledger = StageLedger(context.bus.runs, "deploy", event.run_id)
        done = await deploy_ledger.outcome()
        if done is not None:
            return [*stored, *done]
        where = await self._workspace_of(event.run_id, context)
        if isinstance(where, str):
            return [*stored, *await self._replay(deploy_ledger, event.run_id, "deploy")]
        checkout = CiCheckout(where.workspace, where.base_commit)
        try:
            tree, _ = await asyncio.to_thread(checkout.prepare, event.submission.diff)
            if tree is None:
                return [*stored, *await self._replay(deploy_ledger, event.run_id, "deploy")]
            return [*stored, *await self._deploy_once(event.run_id, checkout, tree, context)]
        finally:
            await asyncio.to_thread(checkout.close)

    async def _deploy_once(
        self, run_id: str, checkout: CiCheckout, tree: str, context: Context
    ) -> Sequence[Event]:
        ledger = StageLedger(context.bus.runs, "deploy", run_id)
        if not await ledger.claim():
            return await self._replay(ledger, run_id, "deploy")
        run = self._runs.get(run_id)
        if run is None or run.stack is None:
            reason = f"no running stack for run {run_id} in this deployer (pid {os.getpid()})"
            result = deploy_failed(run_id, "unknown", 0.0, "skipped", reason)
        else:
            async with run.lock:
                result = await self._merge_and_redeploy(run_id, run.stack, checkout, tree)
        if not result.redeployed:
            context.log.error("deployer.deploy_failed", run_id=run_id, error=result.error)
        await ledger.save([result])
        return [result]

    async def _merge_and_redeploy(
        self, run_id: str, stack: LocalStack, checkout: CiCheckout, tree: str
    ) -> Deployed:
        service = stack.spec.service
        gate = stack.setup.readiness_gate
        started = time.monotonic()
        try:
            await asyncio.to_thread(merge_and_checkout, checkout, tree)
        except Exception as error:
            seconds = time.monotonic() - started
            return deploy_failed(run_id, service, seconds, "skipped", f"merge failed: {error}")
        try:
            await asyncio.to_thread(stack.redeploy, service)
        except LoadControlError as error:
            why = f"readiness gate: the load generator did not obey (drain, warm, resume): {error}"
            return deploy_failed(run_id, service, time.monotonic() - started, "failed", why)
        except Exception as error:
            why = f"redeploy of {service!r} failed: {error}"
            seconds = time.monotonic() - started
            return deploy_failed(run_id, service, seconds, "failed" if gate else "skipped", why)
        return deployed(run_id, service, time.monotonic() - started, gate)

    async def _workspace_of(self, run_id: str, context: Context) -> _CiTarget | str:
        """(workspace, base commit, scenario) of the run, or why they are unknown."""
        run = self._runs.get(run_id)
        stack = run.stack if run is not None else None
        if stack is not None and stack.workspace is not None and stack.base_commit:
            return _CiTarget(stack.workspace.path, stack.base_commit, stack.setup.scenario_id)
        entry = await context.bus.runs.get(run_id)
        try:
            state = None if entry is None else RunState.model_validate_json(entry.value)
        except ValueError as error:
            return f"the run state of {run_id} is unreadable: {error}"
        if state is None or state.stack is None or state.stack.run_workspace is None:
            return f"no workspace known for run {run_id} (no StackReady in its state)"
        if not state.base_commit:
            return f"no base commit known for run {run_id} (no FaultArmed in its state)"
        return _CiTarget(Path(state.stack.run_workspace.path), state.base_commit, state.scenario_id)

    async def _replay(self, ledger: StageLedger, run_id: str, stage: str) -> Sequence[Event]:
        stored = await ledger.outcome()
        if stored is not None:
            return stored
        if run_id in self._runs and stage == "stack":
            return ()  # this process is still at it
        reason = (
            f"the deployer's {stage} stage of run {run_id} was interrupted "
            "(the process handling it stopped); not repeating it"
        )
        return [
            RunFailed(run_id=run_id, producer=PRODUCER, stage=stage, reason=reason, verdict="error")
        ]

    def _down(self, run_id: str, run: _Run) -> list[str]:
        stack, run.stack = run.stack, None
        return down_owned(stack, self.settings.runs_root / run_id)

    def _down_elsewhere(self, run_id: str) -> list[str]:
        """A run whose stack this process does not hold: use its state file, if any."""
        settings = self.settings
        return down_recorded(settings.runs_root / run_id, settings.teardown_timeout_seconds)


def _stack_facts(stack: LocalStack) -> StackFacts:
    endpoints = stack.endpoints
    assert stack.workspace is not None
    return StackFacts(
        stack=stack.spec.name,
        run_dir=stack.run_dir,
        agent_endpoints=endpoints.agent,
        operator_endpoints=endpoints.operator,
        workspace=stack.workspace.path,
        service=stack.spec.service,
    )


def _parser(*kinds: type[E]) -> Callable[[bytes], E]:
    def parse(data: bytes) -> E:
        event = parse_event(data)
        if not isinstance(event, kinds):
            names = " or ".join(kind.__name__ for kind in kinds)
            raise ContractError(f"expected a {names} event, got {event.type}")
        return event

    return parse


@dataclass(frozen=True)
class DeployerService(Service):
    """The deployer's routes; when it stops, every stack it owns is torn down."""

    deployer: Deployer = field(default_factory=Deployer)

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve until `stop`, let in-flight handlers finish, then tear down owned stacks."""
        try:
            await super().run(bus, stop)
        finally:
            with contextlib.suppress(Exception):
                await self.deployer.shutdown(structlog.get_logger("sreforge.deployer"))


def deployer_service(settings: DeployerSettings | None = None) -> DeployerService:
    """The deployer service (settings from the environment unless given)."""
    deployer = Deployer(settings)
    return DeployerService(
        name="deployer",
        deployer=deployer,
        routes=(
            Route(STACK_CONSUMER, deployer.on_run_requested, _parser(RunRequested)),
            Route(SUBMITTED_CONSUMER, deployer.on_submitted, _parser(Submitted)),
            Route(SCORED_CONSUMER, deployer.on_scored, _parser(Scored)),
            Route(CLEANUP_CONSUMER, deployer.on_recorded, _parser(Recorded)),
        ),
    )


SERVICE = deployer_service()
"""The deployer as the engine runs it (`await SERVICE.run(bus, stop_event)`)."""
