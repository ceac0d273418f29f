"""The compose topology: the `Topology` of `_topology.py` over `ComposeStack`.

CI and the merge are host-side on both topologies (a jailed clone of the run's
workspace, the gate's `HostCheckout`), so `checkout` is the local provider's.
`guarded` (`_topology.py`) stays the one boundary where anything else raised
becomes a `DeployerError`.
"""

from __future__ import annotations

import os

from sreforge_contracts import RunRequested

from sreforge_deployer._compose_adopt import adopt_compose_stack
from sreforge_deployer._compose_project import ComposeProject, project_name
from sreforge_deployer._compose_stack import ComposeStack, down_project
from sreforge_deployer._compose_state import read_compose_record
from sreforge_deployer._errors import StackLostError
from sreforge_deployer._patch import PatchTopology, is_patch_run, is_patch_scenario
from sreforge_deployer._ports import reap_stale_lease
from sreforge_deployer._run import owner_running, remove_run_dir
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import find_scenario_dir
from sreforge_deployer._stack_topology import StackTopology
from sreforge_deployer._topology import (
    CiTarget,
    StackFacts,
    Topology,
    guarded,
    run_topology,
    stack_for,
)
from sreforge_deployer.gate import HostCheckout
from sreforge_deployer.local import LocalTopologies

__all__ = ["ComposeTopologies", "ComposeTopology", "PerRunTopologies"]


class ComposeTopology(StackTopology[ComposeStack]):
    """One run's stack as a Compose project (`ComposeStack`)."""

    topology = "compose"

    def up(self) -> StackFacts:
        """Start the project and report both endpoint views (host-published URLs).

        An adopted project: its facts only."""
        stack = self.stack
        endpoints = stack.endpoints if self.adopted else guarded(stack.up)
        return self._facts(
            endpoints,
            agent_network=stack.agent_network,
            network_endpoints=stack.network_endpoints,
        )

    def redeploy(self) -> None:
        """Recreate the service's container behind the scenario's readiness gate."""
        guarded(self.stack.redeploy)

    def down(self) -> list[str]:
        """`compose down -v`, verified by label; what is left."""
        try:
            return self.stack.down()
        except Exception as error:  # never raises: the leftover is the report
            return [f"teardown of run {self.stack.run_id} failed: {error}"]


class ComposeTopologies:
    """The compose `TopologyProvider`; CI checkouts are the local provider's."""

    def __init__(self, local: LocalTopologies) -> None:
        self.local = local

    @property
    def settings(self) -> DeployerSettings:
        """The settings in force (the local provider's)."""
        return self.local.settings

    def open(self, event: RunRequested) -> ComposeTopology:
        """The run's `ComposeStack`, not started."""
        settings = self.settings
        return ComposeTopology(guarded(lambda: stack_for(ComposeStack, event, settings)))

    def adopt(self, run_id: str) -> ComposeTopology:
        """Take over the run's project from its state file (its deployer has stopped)."""
        settings = self.settings

        def build() -> ComposeStack:
            record = read_compose_record(settings.runs_root / run_id)
            if record is None or record.scenario_id is None:
                raise StackLostError(f"run {run_id}: no compose state under {settings.runs_root}")
            if record.owner_pid != os.getpid() and owner_running(
                record.owner_pid, record.owner_started_at
            ):
                raise StackLostError(
                    f"run {run_id}: its project is held by live process {record.owner_pid}"
                )
            return adopt_compose_stack(
                find_scenario_dir(settings.use_cases, record.scenario_id),
                record,
                settings=settings,
                webhook_url=settings.alert_webhook_base,
                webhook_token_file=settings.alert_token_file,
            )

        return ComposeTopology(guarded(build), adopted=True)

    def checkout(self, target: CiTarget, *, confined: bool) -> HostCheckout:
        """A clone of the run workspace on the host (as on the local topology)."""
        return self.local.checkout(target, confined=confined)

    def down_elsewhere(self, run_id: str) -> list[str]:
        """Remove the run's project (from its state file, else by its derived name)."""
        run_dir = self.settings.runs_root / run_id
        record = read_compose_record(run_dir)
        if (
            record is not None
            and record.owner_pid != os.getpid()
            and owner_running(record.owner_pid, record.owner_started_at)
        ):
            return [f"stack of run {run_id} is owned by live process {record.owner_pid}"]
        project = ComposeProject(record.project if record else project_name(run_id))
        remaining = down_project(project, self.settings.teardown_grace_seconds)
        remove_run_dir(run_dir)
        if record is not None and record.port_lock_dir is not None:
            for port in record.ports.values():
                reap_stale_lease(record.port_lock_dir, port)
        return remaining + self.leftovers_of_dir(run_id)

    def leftovers(self, run_id: str) -> list[str]:
        """The run's project's containers, networks and volumes, and its run dir."""
        try:
            found = ComposeProject(project_name(run_id)).leftovers()
        except Exception as error:  # no engine to ask: say so, it is not clean
            found = [f"could not ask the Docker engine about run {run_id}: {error}"]
        return found + self.leftovers_of_dir(run_id)

    def leftovers_of_dir(self, run_id: str) -> list[str]:
        """The run directory, if it is still there."""
        run_dir = self.settings.runs_root / run_id
        return [f"run directory {run_dir}"] if run_dir.exists() else []


class PerRunTopologies:
    """Picks each run's provider by `run_topology`: the request's, else the stack's
    declaration, else local."""

    def __init__(self, local: LocalTopologies, compose: ComposeTopologies) -> None:
        self.local = local
        self.compose = compose

    def open(self, event: RunRequested) -> Topology:
        """The run's topology, from the provider `run_topology` resolves; a patch
        scenario's is its workspace alone (`PatchTopology`), whatever the topology."""
        settings = self.local.settings
        if is_patch_scenario(settings.use_cases, event.scenario):
            return PatchTopology.open(event, settings)
        if run_topology(event, settings) == "compose":
            return self.compose.open(event)
        return self.local.open(event)

    def adopt(self, run_id: str) -> Topology:
        """The run's stack taken over, by the topology that ran it."""
        run_dir = self.local.settings.runs_root / run_id
        if is_patch_run(run_dir):
            return PatchTopology.adopt(run_dir, self.local.settings)
        if self._is_compose(run_id):
            return self.compose.adopt(run_id)
        return self.local.adopt(run_id)

    def checkout(self, target: CiTarget, *, confined: bool) -> HostCheckout:
        """CI's clone: host-side on every topology."""
        return self.local.checkout(target, confined=confined)

    def down_elsewhere(self, run_id: str) -> list[str]:
        """A compose run (its state file says so) by project, any other the local way."""
        run_dir = self.local.settings.runs_root / run_id
        if is_patch_run(run_dir):
            return PatchTopology.adopt(run_dir, self.local.settings).down()
        if self._is_compose(run_id):
            return self.compose.down_elsewhere(run_id)
        return self.local.down_elsewhere(run_id)

    def leftovers(self, run_id: str) -> list[str]:
        """What is left of the run, asked of the topology that ran it."""
        if self._is_compose(run_id):
            return self.compose.leftovers(run_id)
        return self.local.leftovers(run_id)

    def _is_compose(self, run_id: str) -> bool:
        return read_compose_record(self.local.settings.runs_root / run_id) is not None
