"""The deployer's saga: each stage claimed once per run, replayed or resumed on redelivery.

stack → arm (RunRequested), CI → merge → redeploy (Submitted), stop (Scored),
cleanup (Recorded). Each stage is claimed in KV (`deployer.<stage>.<run_id>`, through
`Claims`) and its events stored there, so a redelivered input republishes them
instead of acting twice. A claim found pending is decided by `Turns` (`_claims.py`):
a duplicate to the live process doing it is ignored; one whose holder stopped is taken
over and the stage resumed: the run's stack adopted (`TopologyProvider.adopt`) and the
stage finished or repeated (a boot cut short is cleared and booted again; arming,
CI, the merge and the redeploy are repeated on the adopted stack). Only a stage that
cannot be repeated (its stack lost) ends the run `error`, with the reason.

The saga keeps the topologies this process holds (run id → topology), each behind a
lock that orders provisioning, redeploy and cleanup. It never publishes: each entry
returns a `Step`, the events to publish now and, when the stage goes on once they are
out, what follows.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sreforge_contracts import (
    CiResult,
    Event,
    Recorded,
    RunFailed,
    RunRequested,
    RunState,
    Scored,
    StackReady,
    Submitted,
)

from sreforge_deployer import _stages
from sreforge_deployer._claims import Claims, Log, Step, Turns
from sreforge_deployer._errors import DeployerError
from sreforge_deployer._handlers import PRODUCER, cleaned_up, failure
from sreforge_deployer._topology import Checkout, CiTarget, Topology, TopologyProvider
from sreforge_deployer.gate import remove_ci_clones

__all__ = ["Claims", "Saga", "Step"]


@dataclass
class _Run:
    """A run's topology in this process; the lock orders provisioning, redeploy, cleanup."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    topology: Topology | None = None


class Saga:
    """The deployer's stages over topologies from `provider` (the registry is in here)."""

    def __init__(self, provider: TopologyProvider, clock: _stages.Clock = time.monotonic) -> None:
        self.provider = provider
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._turns = Turns()

    def topologies(self) -> dict[str, Topology]:
        """The topologies this process holds right now, by run id."""
        return {rid: run.topology for rid, run in self._runs.items() if run.topology is not None}

    @asynccontextmanager
    async def stack(self, event: RunRequested, claims: Claims, log: Log) -> AsyncIterator[Step]:
        """Provision: StackReady now, then arming (FaultArmed); once per run."""
        run_id = event.run_id
        turn = await self._turns.take(claims, "stack", run_id, log)
        if not turn.ours:
            yield Step(turn.events)
            return
        if await claims.ended(run_id):
            log.info("deployer.skip_provision", run_id=run_id, reason="ended")
            await claims.save("stack", run_id, [])
            yield Step()
            return
        run = self._runs.setdefault(run_id, _Run())
        with self._turns.working("stack", run_id):
            async with run.lock:
                if turn.resumed:
                    ready = await self._reprovision(event, run, claims, log)
                else:
                    ready = await self._provision(event, run, log)
                if not isinstance(ready, StackReady):
                    if turn.resumed:  # what is left of a lost stack is torn down from its state
                        self._forget(run_id, run)
                    await claims.save("stack", run_id, [ready])
                    yield Step([ready])
                    return

                async def arm() -> Sequence[Event]:
                    armed = await self._arm(run_id, run, log)
                    await claims.save("stack", run_id, [ready, armed])
                    return [armed]

                async def abandon(error: Exception) -> Sequence[Event]:
                    await asyncio.to_thread(self._down, run_id, run)  # do not leave a stack
                    failed = failure(run_id, "stack", error, verdict="error")
                    await claims.save("stack", run_id, [failed])
                    return [failed]

                yield Step([ready], then=arm, abandon=abandon)

    @asynccontextmanager
    async def ci(self, event: Submitted, claims: Claims, log: Log) -> AsyncIterator[Step]:
        """CI gate on a clean checkout (CiResult); green → then merge and redeploy."""
        run_id = event.run_id
        if not event.submission.submitted:
            yield Step()
            return
        if await claims.ended(run_id):
            log.info("deployer.skip_ci", run_id=run_id, reason="run already cleaned up")
            yield Step()
            return
        turn = await self._turns.take(claims, "ci", run_id, log)
        if not turn.ours:
            events = turn.events
            if turn.stored:
                events = await self._resume_after_ci(event, turn.events, claims, log)
            yield Step(events)
            return
        with self._turns.working("ci", run_id):
            where = await self._target_of(run_id, claims)
            if isinstance(where, str):
                failed = RunFailed(
                    run_id=run_id, producer=PRODUCER, stage="ci", reason=where, verdict="error"
                )
                log.error("deployer.stage_gave_up", run_id=run_id, stage="ci", reason=where)
                await claims.save("ci", run_id, [failed])
                yield Step([failed])
                return
            await self._remove_clones(run_id, log)  # a killed predecessor's clone
            where = where._replace(run_id=run_id)
            checkout = await asyncio.to_thread(self.provider.checkout, where, confined=True)
            try:
                gated = await _stages.gate(run_id, checkout, event.submission.diff)
                if isinstance(gated.event, RunFailed):
                    log.error("deployer.ci_failed", run_id=run_id, error=gated.event.reason)
                await claims.save("ci", run_id, [gated.event])
                tree = gated.tree
                if tree is None or not where.redeploys:
                    yield Step([gated.event])
                    return

                async def deploy() -> Sequence[Event]:
                    return await self._deploy_once(run_id, checkout, tree, claims, log)

                yield Step([gated.event], then=deploy)
            finally:
                await asyncio.to_thread(checkout.close)

    async def scored(self, event: Scored) -> Sequence[Event]:
        """Stop the scored run's processes early (no event: CleanedUp follows Recorded)."""
        run = self._runs.get(event.run_id)
        if run is not None:
            async with run.lock:
                if run.topology is not None:
                    await asyncio.to_thread(run.topology.stop_processes)
        return ()

    async def cleanup(self, event: Recorded, claims: Claims, log: Log) -> Sequence[Event]:
        """Tear the run's stack down once its record is written, and verify (CleanedUp)."""
        run_id = event.run_id
        turn = await self._turns.take(claims, "cleanup", run_id, log)
        if not turn.ours:
            return turn.events
        with self._turns.working("cleanup", run_id):
            run = self._runs.get(run_id)
            if run is not None:
                async with run.lock:
                    remaining = await asyncio.to_thread(self._down, run_id, run)
                self._runs.pop(run_id, None)
            else:
                remaining = await asyncio.to_thread(self.provider.down_elsewhere, run_id)
            await self._remove_clones(run_id, log)
        done = cleaned_up(run_id, remaining)
        (log.info if done.verified else log.error)(
            "deployer.cleaned_up", run_id=run_id, leftovers=remaining
        )
        await claims.save("cleanup", run_id, [done])
        return [done]

    async def shutdown(self, log: Log) -> None:
        """Tear down every topology this process still holds (the engine is stopping)."""
        for run_id, run in list(self._runs.items()):
            async with run.lock:
                remaining = await asyncio.to_thread(self._down, run_id, run)
            self._runs.pop(run_id, None)
            log.info("deployer.shutdown_teardown", run_id=run_id, leftovers=remaining)

    async def _provision(self, event: RunRequested, run: _Run, log: Log) -> StackReady | RunFailed:
        try:
            topology = await asyncio.to_thread(self.provider.open, event)
        except DeployerError as error:
            log.error("deployer.stack_failed", run_id=event.run_id, error=str(error))
            return failure(event.run_id, "stack", error)
        run.topology = topology
        ready = await _stages.provision(event.run_id, topology)
        if isinstance(ready, RunFailed):
            run.topology = None  # a failed up() has torn down what it started
            log.error("deployer.stack_failed", run_id=event.run_id, error=ready.reason)
        return ready

    async def _reprovision(
        self, event: RunRequested, run: _Run, claims: Claims, log: Log
    ) -> StackReady | RunFailed:
        """A stack stage taken over: adopt the stack (StackReady again, same facts), or
        clear a boot cut short and boot again. StackReady goes out only after a finished
        `up()`, so a stack that cannot be adopted was never announced unless the run
        state says so, and then nothing can be repeated."""
        run_id = event.run_id
        adopted = await self._adopt(run_id, run, log)
        if not isinstance(adopted, str):
            return await _stages.provision(run_id, adopted)
        state = await _read_state(claims, run_id)
        if not isinstance(state, str) and state is not None and state.stack is not None:
            return self._give_up(run_id, "stack", f"its announced stack is lost: {adopted}", log)
        left = await asyncio.to_thread(self.provider.down_elsewhere, run_id)
        if left:
            why = f"the interrupted boot left {'; '.join(left)}"
            return self._give_up(run_id, "stack", why, log)
        log.warning("deployer.boot_repeated", run_id=run_id, reason=adopted)
        return await self._provision(event, run, log)

    async def _adopt(self, run_id: str, run: _Run, log: Log) -> Topology | str:
        """The run's topology here: held, or adopted from a stopped deployer; else why not."""
        if run.topology is not None:
            return run.topology
        try:
            run.topology = await asyncio.to_thread(self.provider.adopt, run_id)
        except DeployerError as error:
            return str(error)
        log.warning("deployer.stack_adopted", run_id=run_id)
        return run.topology

    def _give_up(self, run_id: str, stage: str, why: str, log: Log) -> RunFailed:
        reason = f"the deployer's {stage} stage of run {run_id} cannot be repeated: {why}"
        log.error("deployer.stage_gave_up", run_id=run_id, stage=stage, reason=reason)
        return RunFailed(
            run_id=run_id, producer=PRODUCER, stage=stage, reason=reason, verdict="error"
        )

    async def _arm(self, run_id: str, run: _Run, log: Log) -> Event:
        assert run.topology is not None
        armed = await _stages.arm(run_id, run.topology)
        if isinstance(armed, RunFailed):
            log.error("deployer.arm_failed", run_id=run_id, error=armed.reason)
            await asyncio.to_thread(self._down, run_id, run)
        return armed

    async def _resume_after_ci(
        self, event: Submitted, stored: Sequence[Event], claims: Claims, log: Log
    ) -> Sequence[Event]:
        """A redelivered Submitted after CI: republish it; finish a merge cut short."""
        run_id = event.run_id
        ci = stored[0] if stored else None
        if not isinstance(ci, CiResult) or not ci.green:
            return stored
        done = await claims.outcome("deploy", run_id)
        if done is not None:
            return [*stored, *done]
        where = await self._target_of(run_id, claims)
        if isinstance(where, str):
            return [*stored, self._give_up(run_id, "deploy", where, log)]
        if not where.redeploys:
            return stored
        checkout = await asyncio.to_thread(self.provider.checkout, where, confined=False)
        try:
            tree = await asyncio.to_thread(checkout.prepare, event.submission.diff)
            if tree is None:
                why = "the green submission no longer applies to its base"
                return [*stored, self._give_up(run_id, "deploy", why, log)]
            return [*stored, *await self._deploy_once(run_id, checkout, tree, claims, log)]
        finally:
            await asyncio.to_thread(checkout.close)

    async def _deploy_once(
        self, run_id: str, checkout: Checkout, tree: str, claims: Claims, log: Log
    ) -> Sequence[Event]:
        turn = await self._turns.take(claims, "deploy", run_id, log)
        if not turn.ours:
            return turn.events
        with self._turns.working("deploy", run_id):
            run = self._runs.setdefault(run_id, _Run())
            async with run.lock:
                topology = await self._adopt(run_id, run, log)
                if isinstance(topology, str):
                    # A harness fault, never the agent's: `error`, not a failed redeploy.
                    self._forget(run_id, run)
                    why = f"no running stack for it here (pid {os.getpid()}): {topology}"
                    lost = self._give_up(run_id, "deploy", why, log)
                    await claims.save("deploy", run_id, [lost])
                    return [lost]
                result = await _stages.merge_and_redeploy(
                    run_id, topology, checkout, tree, self._clock
                )
        if not result.redeployed:
            log.error("deployer.deploy_failed", run_id=run_id, error=result.error)
        await claims.save("deploy", run_id, [result])
        return [result]

    async def _target_of(self, run_id: str, claims: Claims) -> CiTarget | str:
        """(workspace, base commit, scenario) of the run, or why they are unknown."""
        run = self._runs.get(run_id)
        target = run.topology.ci_target() if run is not None and run.topology is not None else None
        if target is not None:
            return target
        state = await _read_state(claims, run_id)
        if isinstance(state, str):
            return state
        if state is None or state.stack is None or state.stack.run_workspace is None:
            return f"no workspace known for run {run_id} (no StackReady in its state)"
        if not state.base_commit:
            return f"no base commit known for run {run_id} (no FaultArmed in its state)"
        workspace = state.stack.run_workspace.path
        return CiTarget(Path(workspace), state.base_commit, state.scenario_id)

    async def _remove_clones(self, run_id: str, log: Log) -> None:
        """Remove CI clones of the run left by a deployer killed mid-CI (logged)."""
        for path in await asyncio.to_thread(remove_ci_clones, run_id):
            log.error("deployer.ci_clone_left", run_id=run_id, path=str(path),
                      reason="a CI clone of an interrupted deployer was left; removed")  # fmt: skip

    def _forget(self, run_id: str, run: _Run) -> None:
        """Drop a run this process holds no stack of (cleanup then asks the provider)."""
        if run.topology is None and self._runs.get(run_id) is run:
            self._runs.pop(run_id, None)

    def _down(self, run_id: str, run: _Run) -> list[str]:
        topology, run.topology = run.topology, None
        if topology is None:
            return self.provider.leftovers(run_id)
        return topology.down()


async def _read_state(claims: Claims, run_id: str) -> RunState | str | None:
    """The run's state, or why it is unreadable."""
    try:
        return await claims.run_state(run_id)
    except ValueError as error:
        return f"the run state of {run_id} is unreadable: {error}"
