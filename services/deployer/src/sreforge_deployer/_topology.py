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
subtypes to verdicts (`guarded` is where anything else becomes one). Two
implementations: the local topology (`sreforge_deployer.local`: `LocalTopologies` over
`LocalStack`) and the compose topology (`_compose_topology.py`, over `ComposeStack`);
`PerRunTopologies` opens each run's from the one `run_topology` resolves (the request's,
else the one the scenario's `stack.toml` declares, else local). Both describe a
run's stack with `stack_for`, and both check out CI's clone on the host
(`sreforge_deployer.gate.HostCheckout`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from sreforge_contracts import RunRequested, TopologyName

from sreforge_deployer._errors import DeployerError, TopologyFault
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import (
    ScenarioSetup,
    find_scenario_dir,
    load_scenario_setup,
    load_stack_spec,
)

if TYPE_CHECKING:  # the gate's types name the protocol's; the gate imports this module
    from sreforge_deployer.gate import CiRun

__all__ = [
    "ArmFacts",
    "Checkout",
    "CiTarget",
    "StackEndpoints",
    "StackFacts",
    "Topology",
    "TopologyProvider",
    "guarded",
    "run_topology",
    "stack_for",
]

T = TypeVar("T")


@dataclass(frozen=True)
class StackEndpoints:
    """URLs of a running stack: what the agent may be told, and everything for operators."""

    agent: dict[str, str]
    operator: dict[str, str]


@dataclass(frozen=True)
class StackFacts:
    """What a provisioned stack reports for StackReady."""

    stack: str
    run_dir: Path
    agent_endpoints: dict[str, str]
    operator_endpoints: dict[str, str]
    workspace: Path
    service: str
    topology: TopologyName = "local"
    agent_network: str | None = None
    """The Docker network an in-box agent session joins (compose only)."""
    network_endpoints: dict[str, str] = field(default_factory=dict)
    """The agent's endpoints from inside `agent_network`."""


@dataclass(frozen=True)
class ArmFacts:
    """What arming reports for FaultArmed."""

    armed_at: datetime
    base_commit: str
    fault_commit: str | None
    setup: ScenarioSetup


class CiTarget(NamedTuple):
    """Where CI checks a run's submission out from, and whose tests protect it."""

    workspace: Path
    base_commit: str
    scenario_id: str
    run_id: str = ""
    """Names the CI clone (`ci-<run_id>-*`), so a clone a killed deployer left is found."""
    redeploys: bool = True
    """False for a patch run: a green CI is its last deployer step (no merge, no redeploy)."""


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


def run_topology(event: RunRequested, settings: DeployerSettings) -> TopologyName:
    """Where the run's stack runs: what its request names, else what the scenario's stack
    declares (`topology` in its `stack.toml`), else `local`. A scenario or stack that
    cannot be read resolves to `local`, whose opening then fails with the reason."""
    if event.topology is not None:
        return event.topology
    try:
        setup = load_scenario_setup(find_scenario_dir(settings.use_cases, event.scenario))
        declared = load_stack_spec(setup.stack_dir).topology
    except DeployerError:
        return "local"
    return declared or "local"


def stack_for(make: Callable[..., T], event: RunRequested, settings: DeployerSettings) -> T:
    """The run's stack of kind `make` (`LocalStack`, `ComposeStack`: one constructor
    signature), described from its RunRequested and the deployer's settings."""
    return make(
        find_scenario_dir(settings.use_cases, event.scenario),
        time_scale=event.time_scale,
        run_id=event.run_id,
        webhook_url=settings.alert_webhook_base,
        webhook_route=event.alert_route,
        webhook_token_file=settings.alert_token_file,
        settings=settings,
    )


def guarded(call: Callable[[], T]) -> T:
    """`call()`, anything it raises but a `DeployerError` raised as a `TopologyFault`.

    The one boundary where a topology's other errors (a stack's, git's) become the
    package's, so the stages catch only `DeployerError`.
    """
    try:
        return call()
    except DeployerError:
        raise
    except Exception as error:  # the boundary: whatever else broke, as the package's error
        raise TopologyFault(error) from error
