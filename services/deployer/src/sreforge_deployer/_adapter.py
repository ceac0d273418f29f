"""The deployer on the bus: which input runs which stage of the saga, what goes out.

RunRequested → stack, arm (StackReady, FaultArmed); Submitted → CI, merge, redeploy
(CiResult, Deployed); Scored → stop the processes; Recorded → cleanup (CleanedUp).
Each run's stack is local or a Compose project, as its RunRequested says.
The decisions, claims and replays are in `_saga.py`; each stage returns its events
and this module publishes them. Stopping the service tears down every owned stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import structlog
from sreforge_bus import Bus, ConsumerSpec, Context, Emit, Route, Service
from sreforge_contracts import Event, Recorded, RunRequested, Scored, Submitted

from sreforge_deployer._compose_topology import ComposeTopologies, PerRunTopologies
from sreforge_deployer._ledger import KvClaims
from sreforge_deployer._saga import Saga, Step
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer.local import LocalStack, LocalTopologies, LocalTopology

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

STACK_CONSUMER = ConsumerSpec("deployer-stack", ("sreforge.run.*.RunRequested",))
SUBMITTED_CONSUMER = ConsumerSpec("deployer-submitted", ("sreforge.run.*.Submitted",))
# Cleanup waits for the record, not the verdict: the recorder still reads the run's
# folder (the agent's transcript) when the verdict arrives.
CLEANUP_CONSUMER = ConsumerSpec("deployer-cleanup", ("sreforge.run.*.Recorded",))
# Nothing reads a stack's processes once the run is scored, so they stop then, while
# the record is written; the run dir and the verified teardown still wait for Recorded.
SCORED_CONSUMER = ConsumerSpec("deployer-scored", ("sreforge.run.*.Scored",))


class Deployer:
    """The deployer's handlers: the saga over each run's topology, wired to the bus."""

    def __init__(self, settings: DeployerSettings | None = None) -> None:
        self.topologies = LocalTopologies(settings)
        # Each run's RunRequested.topology picks its provider; local is the default.
        per_run = PerRunTopologies(self.topologies, ComposeTopologies(self.topologies))
        self.saga = Saga(per_run)

    @property
    def settings(self) -> DeployerSettings:
        """The settings in force (`SREFORGE_DEPLOYER_*`), read on first use."""
        return self.topologies.settings

    def stacks(self) -> dict[str, LocalStack]:
        """The local stacks this process owns right now, by run id."""
        held = self.saga.topologies().items()
        return {rid: t.stack for rid, t in held if isinstance(t, LocalTopology)}

    def held(self) -> int:
        """How many runs' stacks this process holds now (a worker host's used slots)."""
        return len(self.saga.topologies())

    async def on_run_requested(self, event: RunRequested, context: Context) -> Sequence[Event]:
        """Provision the run's stack (StackReady), then arm it (FaultArmed); once per run."""
        return await _drive(
            self.saga.stack(event, KvClaims(context.bus.runs), context.log), context
        )

    async def on_submitted(self, event: Submitted, context: Context) -> Sequence[Event]:
        """CI gate on a clean checkout (CiResult); green → merge and redeploy (Deployed)."""
        return await _drive(self.saga.ci(event, KvClaims(context.bus.runs), context.log), context)

    async def on_scored(self, event: Scored, context: Context) -> Sequence[Event]:
        """Stop the scored run's processes early (no event: CleanedUp follows Recorded)."""
        return await self.saga.scored(event)

    async def on_recorded(self, event: Recorded, context: Context) -> Sequence[Event]:
        """Tear the run's stack down once its record is written, and verify (CleanedUp)."""
        return await self.saga.cleanup(event, KvClaims(context.bus.runs), context.log)

    async def shutdown(self, log: structlog.stdlib.BoundLogger) -> None:
        """Tear down every stack this process still owns (the engine is stopping)."""
        await self.saga.shutdown(log)

    async def stopped(self, bus: Bus) -> None:
        """The stop hook: after the last handler returned, tear down the owned stacks."""
        with contextlib.suppress(Exception):
            await self.shutdown(structlog.get_logger("sreforge.deployer"))


async def _drive(stage: AbstractAsyncContextManager[Step], context: Context) -> Sequence[Event]:
    """A step's events; a stage that goes on once they are out (`then`) goes on inside
    its own scope, which holds the run's lock, so that step is emitted from here."""
    async with stage as step:
        if step.then is None:
            return step.events
        # A refused publish (e.g. of StackReady) is answered by the stage undoing itself.
        await context.emit(Emit(events=step.events, then=step.then, refused=step.abandon))
        return ()


@dataclass(frozen=True)
class DeployerService(Service):
    """The deployer's routes; when it stops, every stack it owns is torn down."""

    deployer: Deployer = field(default_factory=Deployer)


def deployer_service(settings: DeployerSettings | None = None) -> DeployerService:
    """The deployer service (settings from the environment unless given)."""
    deployer = Deployer(settings)
    return DeployerService(
        name="deployer",
        deployer=deployer,
        routes=(
            Route.on(STACK_CONSUMER, RunRequested, deployer.on_run_requested),
            Route.on(SUBMITTED_CONSUMER, Submitted, deployer.on_submitted),
            Route.on(SCORED_CONSUMER, Scored, deployer.on_scored),
            Route.on(CLEANUP_CONSUMER, Recorded, deployer.on_recorded),
        ),
        on_stop=(deployer.stopped,),
    )


SERVICE = deployer_service()
"""The deployer as the engine runs it (`await SERVICE.run(bus, stop_event)`)."""
