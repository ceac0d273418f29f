"""The deployer's stages, each over a topology (or a checkout): what happened, as events.

Nothing here claims, stores or publishes: `_saga.py` does that around them. A stage
catches only `DeployerError` (every topology's and checkout's failure, see
`_topology.py`) and maps it to the verdict its step owes:

| stage    | failure                          | event                                     |
|----------|----------------------------------|-------------------------------------------|
| stack    | any DeployerError                | RunFailed(stage=stack, aborted)           |
| arm      | any DeployerError                | RunFailed(stage=arm, aborted)             |
| ci       | the gate broke (clone, jail)     | RunFailed(stage=ci, error)                |
| merge    | any DeployerError                | Deployed(redeployed=False, skipped)       |
| redeploy | LoadControlError                 | Deployed(False, failed): readiness gate   |
| redeploy | any other DeployerError          | Deployed(False, failed; skipped w/o gate) |
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from sreforge_contracts import CiResult, Deployed, FaultArmed, RunFailed, StackReady

from sreforge_deployer._errors import DeployerError, LoadControlError
from sreforge_deployer._handlers import (
    ci_result,
    deploy_failed,
    deployed,
    failure,
    fault_armed,
    stack_ready,
)
from sreforge_deployer._topology import Checkout, Topology

__all__ = ["Clock", "Gated", "arm", "gate", "merge_and_redeploy", "provision"]

Clock = Callable[[], float]
"""Seconds on a monotonic clock (`time.monotonic` in service)."""


class Gated(NamedTuple):
    """CI's outcome: the event, and the submitted tree when it is green (to merge)."""

    event: CiResult | RunFailed
    tree: str | None


async def provision(run_id: str, topology: Topology) -> StackReady | RunFailed:
    """Start the run's stack: StackReady with both endpoint views, or why it did not start."""
    try:
        facts = await asyncio.to_thread(topology.up)
    except DeployerError as error:
        return failure(run_id, "stack", error)
    return stack_ready(run_id, facts)


async def arm(run_id: str, topology: Topology) -> FaultArmed | RunFailed:
    """Deliver the fault and start the load: FaultArmed, or why arming failed."""
    try:
        facts = await asyncio.to_thread(topology.arm)
    except DeployerError as error:
        return failure(run_id, "arm", error)
    return fault_armed(run_id, facts)


async def gate(run_id: str, checkout: Checkout, diff: str) -> Gated:
    """Run CI on the submission: CiResult (red or green), or RunFailed when the gate broke."""
    try:
        run = await asyncio.to_thread(checkout.gate, diff)
    except DeployerError as error:  # the gate itself broke (clone, disk): an engine error
        return Gated(failure(run_id, "ci", error, verdict="error"), None)
    return Gated(ci_result(run_id, run), run.tree if run.green else None)


async def merge_and_redeploy(
    run_id: str, topology: Topology, checkout: Checkout, tree: str, clock: Clock
) -> Deployed:
    """Merge the green tree into the run's main, then redeploy the service (readiness gate)."""
    service, gated = topology.service, topology.readiness_gate
    started = clock()
    try:
        await asyncio.to_thread(checkout.merge, tree)
    except DeployerError as error:
        return deploy_failed(
            run_id, service, clock() - started, "skipped", f"merge failed: {error}"
        )
    try:
        await asyncio.to_thread(topology.redeploy)
    except LoadControlError as error:
        why = f"readiness gate: the load generator did not obey (drain, warm, resume): {error}"
        return deploy_failed(run_id, service, clock() - started, "failed", why)
    except DeployerError as error:
        why = f"redeploy of {service!r} failed: {error}"
        seconds = clock() - started
        return deploy_failed(run_id, service, seconds, "failed" if gated else "skipped", why)
    return deployed(run_id, service, clock() - started, gated)
