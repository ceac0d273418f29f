"""The SREForge deployer service. Stacks, fault arming, CI gate, auto-merge, redeploy and cleanup.

On the bus (`SERVICE`, a `DeployerService`): RunRequested → StackReady, FaultArmed;
Submitted → CiResult, Deployed; Scored → stop the stack's processes; Recorded →
CleanedUp. Its stages see a run's stack only through the `Topology` / `TopologyProvider`
protocols (`_topology.py`), with two implementations: the local topology
(`sreforge_deployer.local`, the default) and the compose topology (`_compose_*.py`).
The CI gate is `sreforge_deployer.gate`. What both topologies share (the stack
description, the workspace, the fault's delivery, the rendered observability, ports,
settings and the one exception tree) is exported here.
"""

from sreforge_deployer._adapter import SERVICE, Deployer, DeployerService, deployer_service
from sreforge_deployer._errors import (
    BinaryMissingError,
    ComponentStartError,
    ConfinementFailed,
    DeployerError,
    LoadControlError,
    PortUnavailableError,
    StackLostError,
    StackSpecError,
    TeardownIncompleteError,
    TopologyFault,
    WorkspaceError,
)
from sreforge_deployer._history import Author
from sreforge_deployer._patch import PatchTopology
from sreforge_deployer._ports import PortAllocator, PortLease
from sreforge_deployer._render import render_observability, stack_rule_problems
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._topology import (
    ArmFacts,
    Checkout,
    CiTarget,
    StackEndpoints,
    StackFacts,
    Topology,
    TopologyProvider,
)
from sreforge_deployer._workspace import Workspace

__all__ = [
    "SERVICE",
    "ArmFacts",
    "Author",
    "BinaryMissingError",
    "Checkout",
    "CiTarget",
    "ComponentStartError",
    "ConfinementFailed",
    "Deployer",
    "DeployerError",
    "DeployerService",
    "DeployerSettings",
    "LoadControlError",
    "PatchTopology",
    "PortAllocator",
    "PortLease",
    "PortUnavailableError",
    "StackEndpoints",
    "StackFacts",
    "StackLostError",
    "StackSpecError",
    "TeardownIncompleteError",
    "Topology",
    "TopologyFault",
    "TopologyProvider",
    "Workspace",
    "WorkspaceError",
    "deployer_service",
    "render_observability",
    "stack_rule_problems",
]
