"""Pure decisions of the deployer: which events its stages emit, how failures read.

Nothing here touches the bus, a process or git; `_adapter.py` does the I/O.
"""

from __future__ import annotations

from typing import Literal

from sreforge_contracts import (
    CiResult,
    CiTestSet,
    CleanedUp,
    Deployed,
    FaultArmed,
    RunFailed,
    RunWorkspace,
    StackReady,
)

from sreforge_deployer._errors import TopologyFault
from sreforge_deployer._topology import ArmFacts, StackFacts
from sreforge_deployer.gate import GRADED_SETS, CiRun

__all__ = [
    "MAX_REASON_CHARS",
    "PRODUCER",
    "ci_result",
    "cleaned_up",
    "deploy_failed",
    "deployed",
    "failure",
    "fault_armed",
    "readiness",
    "stack_ready",
]

MAX_REASON_CHARS = 4000
PRODUCER = "deployer"
Readiness = Literal["passed", "failed", "skipped"]


def stack_ready(run_id: str, facts: StackFacts) -> StackReady:
    """StackReady with both endpoint views and the workspace the agent works in."""
    return StackReady(
        run_id=run_id,
        producer=PRODUCER,
        stack=facts.stack,
        run_dir=str(facts.run_dir),
        agent_endpoints=facts.agent_endpoints,
        operator_endpoints=facts.operator_endpoints,
        run_workspace=RunWorkspace(path=str(facts.workspace), service=facts.service),
        topology=facts.topology,
        agent_network=facts.agent_network,
        network_endpoints=facts.network_endpoints,
    )


def fault_armed(run_id: str, facts: ArmFacts) -> FaultArmed:
    """FaultArmed: armed_at is when load started on the faulted build."""
    rate = facts.setup.load_rate
    return FaultArmed(
        run_id=run_id,
        producer=PRODUCER,
        armed_at=facts.armed_at,
        delivery_mode=facts.setup.delivery_mode,
        fault_commit=facts.fault_commit,
        base_commit=facts.base_commit,
        load_target_rps=float(rate) if rate and float(rate) > 0 else None,
    )


def failure(
    run_id: str, stage: str, error: BaseException, verdict: Literal["aborted", "error"] = "aborted"
) -> RunFailed:
    """RunFailed whose reason is the error's own message (component, log tail), capped.

    A `TopologyFault` reads as the error it wraps.
    """
    if isinstance(error, TopologyFault):
        error = error.cause
    text = str(error).strip() or type(error).__name__
    reason = f"{type(error).__name__}: {text}"
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS // 4] + "\n[...]\n" + reason[-MAX_REASON_CHARS // 2 :]
    return RunFailed(run_id=run_id, producer=PRODUCER, stage=stage, reason=reason, verdict=verdict)


def ci_result(run_id: str, run: CiRun) -> CiResult:
    """The gate's outcome as an event, with each test set that ran and its counts."""
    return CiResult(
        run_id=run_id,
        producer=PRODUCER,
        green=run.green,
        output=run.output,
        duration_ms=run.duration_ms,
        exit_code=run.exit_code,
        test_sets=[
            CiTestSet(
                name=ran.name,
                green=ran.green,
                exit_code=ran.exit_code,
                passed=ran.passed,
                failed=ran.failed,
                skipped=ran.skipped,
                errors=ran.errors,
                duration_ms=ran.duration_ms,
                passed_tests=list(ran.passed_tests) if ran.name in GRADED_SETS else None,
                failed_tests=list(ran.failed_tests) if ran.name in GRADED_SETS else None,
            )
            for ran in run.test_sets
        ]
        or None,
    )


def readiness(gate: bool, resumed: bool) -> Readiness:
    """`skipped` without a gate; else whether load resumed on the new build."""
    if not gate:
        return "skipped"
    return "passed" if resumed else "failed"


def deployed(run_id: str, service: str, seconds: float, gate: bool) -> Deployed:
    """A successful redeploy of `service`."""
    return Deployed(
        run_id=run_id,
        producer=PRODUCER,
        redeployed=True,
        service=service,
        duration_ms=seconds * 1000,
        readiness=readiness(gate, resumed=True),
    )


def deploy_failed(
    run_id: str, service: str, seconds: float, readiness_state: Readiness, error: str
) -> Deployed:
    """A failed merge or redeploy; `error` says which step and why."""
    return Deployed(
        run_id=run_id,
        producer=PRODUCER,
        redeployed=False,
        service=service,
        duration_ms=seconds * 1000,
        readiness=readiness_state,
        error=error[:MAX_REASON_CHARS],
    )


def cleaned_up(run_id: str, leftovers: list[str]) -> CleanedUp:
    """CleanedUp: verified when nothing of the run is left."""
    return CleanedUp(run_id=run_id, producer=PRODUCER, verified=not leftovers, leftovers=leftovers)
