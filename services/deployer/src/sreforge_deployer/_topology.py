"""What the deployer's stages need from a run's stack, whatever runs it.

```
TopologyProvider                     one per deployer
├── open(RunRequested) → Topology    describe a run's stack (nothing started yet)
├── adopt(run_id) → Topology         take over a run's running stack (a restarted deployer)
├── checkout(CiTarget) → Checkout    a throwaway clone of a run's workspace for CI/merge
├── down_elsewhere(run_id) → [str]   tear down a stack this process does not hold
└── leftovers(run_id) → [str]        what is left of a run whose stack never came up
Topology                             one run's stack
├── up() → StackFacts                start everything health-gated (both endpoint views)
├── arm() → ArmFacts                 deliver the fault, start the load
├── redeploy()                       restart the service from the workspace (readiness gate)
├── ci_target() → CiTarget | None    workspace + base commit + scenario, once armed
├── stop_processes()                 stop the processes, keep the run dir
└── down() → [str]                   tear down and verify; what is left (empty = clean)
```

Every failure of a topology or a checkout is a `DeployerError`; the stages map its
subtypes to verdicts. Two implementations: the local topology (`_local_topology.py`,
over `LocalStack`) and the compose topology (`_compose_topology.py`, over `ComposeStack`);
`PerRunTopologies` opens each run's from the one its RunRequested names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from sreforge_contracts import RunRequested

from sreforge_deployer._ci import CiRun
from sreforge_deployer._handlers import ArmFacts, StackFacts

__all__ = ["Checkout", "CiTarget", "StackEndpoints", "Topology", "TopologyProvider"]


@dataclass(frozen=True)
class StackEndpoints:
    """URLs of a running stack: what the agent may be told, and everything for operators."""

    agent: dict[str, str]
    operator: dict[str, str]


class CiTarget(NamedTuple):
    """Where CI checks a run's submission out from, and whose tests protect it."""

    workspace: Path
    base_commit: str
    scenario_id: str
    run_id: str = ""
    """Names the CI clone (`ci-<run_id>-*`), so a clone a killed deployer left is found."""


class Topology(Protocol):
    """One run's stack. Calls block (processes, HTTP): the saga runs them in a thread."""

    @property
    def service(self) -> str:
        """The component the agent fixes (the one CD redeploys)."""
        ...

    @property
    def readiness_gate(self) -> bool:
        """Whether a redeploy drains, warms and resumes the load (the scenario says)."""
        ...

    def up(self) -> StackFacts:
        """Start the stack; on failure nothing of it is left and a DeployerError is raised.

        On a stack already up (adopted through `TopologyProvider.adopt`, or up before a
        failed attempt of the stage): its facts, nothing started.
        """
        ...

    def arm(self) -> ArmFacts:
        """Deliver the fault and start the load on the faulted build.

        On a stack armed before (adopted, or by a failed attempt): the facts arming
        recorded, nothing repeated.
        """
        ...

    def redeploy(self) -> None:
        """Restart the service from the workspace's tree, behind the readiness gate if on.

        `LoadControlError` when the load generator refused to drain or resume.
        """
        ...

    def ci_target(self) -> CiTarget | None:
        """The run's workspace and base commit (None before the stack is up)."""
        ...

    def stop_processes(self) -> None:
        """Stop the stack's processes; the run dir stays for the record."""
        ...

    def down(self) -> list[str]:
        """Tear everything down and verify: what is left (empty when clean). Never raises."""
        ...


class Checkout(Protocol):
    """A throwaway clone of a run's workspace at its base commit (CI, then the merge)."""

    def gate(self, diff: str) -> CiRun:
        """Apply `diff` and run the CI test sets (confined); never raises for a red run."""
        ...

    def prepare(self, diff: str) -> str | None:
        """Apply `diff` again (a resumed merge): the tree id, None when it no longer applies."""
        ...

    def merge(self, tree: str) -> None:
        """Merge `tree` into the run workspace's main and check it out there."""
        ...

    def close(self) -> None:
        """Remove the clone."""
        ...


class TopologyProvider(Protocol):
    """Makes each run's topology and reaches stacks this process does not hold."""

    def open(self, event: RunRequested) -> Topology:
        """The run's stack, described but not started; `StackSpecError` if unknown."""
        ...

    def adopt(self, run_id: str) -> Topology:
        """The run's stack, started by a deployer that has stopped, held here from now on.

        Only a whole, healthy stack is adopted: one that is armed comes back armed (its
        `ci_target()` known), one that is not can still be armed. `StackLostError` when
        it cannot be (boot unfinished, a component gone, no state, or a topology that
        cannot adopt at all: that is the safe answer, and the run then ends `error`).
        """
        ...

    def checkout(self, target: CiTarget, *, confined: bool) -> Checkout:
        """A clone for CI (`confined`: the tests run jailed) or for a resumed merge."""
        ...

    def down_elsewhere(self, run_id: str) -> list[str]:
        """Tear down a run's stack from its state file; what is left."""
        ...

    def leftovers(self, run_id: str) -> list[str]:
        """What is left of a run whose stack is not running here (its run dir, if any)."""
        ...
