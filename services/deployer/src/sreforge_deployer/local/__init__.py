"""The local topology: one run's stack as child process groups on leased loopback ports.

`LocalTopologies` is its `TopologyProvider` and `LocalTopology` its `Topology`
(`sreforge_deployer._topology`): what the deployer's stages use. Underneath, `LocalStack`
runs the stack (workspace, seed, components health-gated, its own Prometheus and
Alertmanager; `up`, `arm`, `redeploy`, `down` verified) and keeps its state file
`stack.json` (`StackRecord`), through which `list_stacks` and `teardown_run` reach stacks
other processes started (`sreforge stack list|down`). A stack that `dies_with_owner` is
torn down by its owner's warden when the owner ends however it ends (`watch_owner`), or by
the next engine start (`reap_orphans`).
"""

from sreforge_deployer.local._provider import LocalTopologies, LocalTopology
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import StackRecord, owner_alive
from sreforge_deployer.local._teardown import TeardownReport, list_stacks, teardown_run
from sreforge_deployer.local._warden import Reaped, reap_orphans, watch_owner

__all__ = [
    "LocalStack",
    "LocalTopologies",
    "LocalTopology",
    "Reaped",
    "StackRecord",
    "TeardownReport",
    "list_stacks",
    "owner_alive",
    "reap_orphans",
    "teardown_run",
    "watch_owner",
]
