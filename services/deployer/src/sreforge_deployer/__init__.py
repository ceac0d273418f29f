"""The SREForge deployer service. Stacks, fault arming, CI gate, auto-merge, redeploy and cleanup.

On the bus (`SERVICE`, a `DeployerService`): RunRequested → StackReady, FaultArmed;
Submitted → CiResult, Deployed; Scored / RunFailed → CleanedUp. Underneath, the local
topology: `LocalStack` runs one run's stack as child processes on leased loopback
ports, with its own Prometheus, Alertmanager and git workspace; `teardown_run` /
`list_stacks` reach stacks other processes started.
"""

from sreforge_deployer._adapter import SERVICE, Deployer, DeployerService, deployer_service
from sreforge_deployer._errors import (
    BinaryMissingError,
    ComponentStartError,
    ConfinementFailed,
    DeployerError,
    LoadControlError,
    PortUnavailableError,
    StackSpecError,
    TeardownIncompleteError,
    WorkspaceError,
)
from sreforge_deployer._history import Author
from sreforge_deployer._ports import PortAllocator, PortLease
from sreforge_deployer._render import render_observability
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._topology import StackEndpoints
from sreforge_deployer._workspace import Workspace
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import StackRecord
from sreforge_deployer.local._teardown import TeardownReport, list_stacks, teardown_run

__all__ = [
    "SERVICE",
    "Author",
    "BinaryMissingError",
    "ComponentStartError",
    "ConfinementFailed",
    "Deployer",
    "DeployerError",
    "DeployerService",
    "DeployerSettings",
    "LoadControlError",
    "LocalStack",
    "PortAllocator",
    "PortLease",
    "PortUnavailableError",
    "StackEndpoints",
    "StackRecord",
    "StackSpecError",
    "TeardownIncompleteError",
    "TeardownReport",
    "Workspace",
    "WorkspaceError",
    "deployer_service",
    "list_stacks",
    "render_observability",
    "teardown_run",
]
