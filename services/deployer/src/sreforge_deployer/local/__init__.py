"""The local topology: one run's stack as child process groups on leased loopback ports.

`LocalTopologies` is its `TopologyProvider` and `LocalTopology` its `Topology`
(`sreforge_deployer._topology`): what the deployer's stages use. Underneath, `LocalStack`
runs the stack (workspace, seed, components health-gated, its own Prometheus and
Alertmanager; `up`, `arm`, `redeploy`, `down` verified) and keeps its state file
`stack.json` (`StackRecord`), through which `list_stacks` and `teardown_run` reach stacks
other processes started (`sreforge stack list|down`).
"""

from sreforge_deployer.local._provider import LocalTopologies, LocalTopology
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import StackRecord
from sreforge_deployer.local._teardown import TeardownReport, list_stacks, teardown_run

__all__ = [
    "LocalStack",
    "LocalTopologies",
    "LocalTopology",
    "StackRecord",
    "TeardownReport",
    "list_stacks",
    "teardown_run",
]
