"""`StackTopology`: what the local and the compose topologies answer alike.

A run's `Topology` over a stack (`LocalStack`, `ComposeStack`): the service, the readiness
gate, arming once (an adopted or half-done arming reports what it recorded), CI's target
and stopping are the same on both; only starting (`up`), the redeploy and the teardown
differ, and those stay in each topology's own class.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from sreforge_contracts import TopologyName

from sreforge_deployer._spec import ScenarioSetup, StackSpec
from sreforge_deployer._topology import ArmFacts, CiTarget, StackEndpoints, StackFacts, guarded
from sreforge_deployer._workspace import Workspace

__all__ = ["RunStack", "StackTopology"]


class RunStack(Protocol):
    """What a topology reads of its stack and asks of it beyond starting and stopping."""

    spec: StackSpec
    setup: ScenarioSetup
    run_dir: Path
    workspace: Workspace | None
    base_commit: str | None
    fault_commit: str | None
    armed_at: datetime | None

    def arm(self) -> str:
        """Deliver the fault, start the load; the base commit."""
        ...

    def stop_processes(self) -> None:
        """Stop the stack's processes; the run dir stays."""
        ...


S = TypeVar("S", bound=RunStack)


class StackTopology(Generic[S]):
    """The `Topology` calls both stacks answer alike; `up`, `redeploy` and `down` are
    each topology's."""

    topology: TopologyName = "local"

    def __init__(self, stack: S, *, adopted: bool = False) -> None:
        self.stack = stack
        self.adopted = adopted

    @property
    def service(self) -> str:
        """The component the agent fixes."""
        return self.stack.spec.service

    @property
    def readiness_gate(self) -> bool:
        """The scenario's READINESS_GATE."""
        return self.stack.setup.readiness_gate

    def arm(self) -> ArmFacts:
        """Deliver the fault, start the load (the stack's `arm`).

        A stack armed before (adopted, or by an attempt that failed): what it recorded."""
        stack = self.stack
        armed = stack.armed_at is not None and stack.base_commit
        base_commit = stack.base_commit if armed else guarded(stack.arm)
        assert base_commit is not None
        assert stack.armed_at is not None
        return ArmFacts(stack.armed_at, base_commit, stack.fault_commit, stack.setup)

    def ci_target(self) -> CiTarget | None:
        """The workspace and base commit once the stack is up."""
        stack = self.stack
        if stack.workspace is None or not stack.base_commit:
            return None
        return CiTarget(stack.workspace.path, stack.base_commit, stack.setup.scenario_id)

    def stop_processes(self) -> None:
        """Stop the stack's processes, keep the run dir."""
        self.stack.stop_processes()

    def _facts(
        self,
        endpoints: StackEndpoints,
        *,
        agent_network: str | None = None,
        network_endpoints: dict[str, str] | None = None,
    ) -> StackFacts:
        stack = self.stack
        assert stack.workspace is not None
        return StackFacts(
            stack=stack.spec.name,
            run_dir=stack.run_dir,
            agent_endpoints=endpoints.agent,
            operator_endpoints=endpoints.operator,
            workspace=stack.workspace.path,
            service=stack.spec.service,
            topology=self.topology,
            agent_network=agent_network,
            network_endpoints=network_endpoints or {},
        )
