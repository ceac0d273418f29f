"""The local topology: the `Topology` of `sreforge_deployer._topology` over `LocalStack`.

Every call into a stack goes through `guarded`, so the stages see only `DeployerError`s.
CI and the merge are the gate's `HostCheckout`.
"""

from __future__ import annotations

import os

from sreforge_contracts import RunRequested

from sreforge_deployer._errors import StackLostError
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import find_scenario_dir
from sreforge_deployer._stack_topology import StackTopology
from sreforge_deployer._topology import CiTarget, StackFacts, guarded, stack_for
from sreforge_deployer.gate import HostCheckout, host_checkout
from sreforge_deployer.local._adopt import adopt_stack
from sreforge_deployer.local._cleanup import down_owned, down_recorded
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import owner_alive, read_record
from sreforge_deployer.local._teardown import leftovers

__all__ = ["LocalTopologies", "LocalTopology"]


class LocalTopology(StackTopology[LocalStack]):
    """One run's stack as local child processes (`LocalStack`)."""

    def up(self) -> StackFacts:
        """Start the stack (`LocalStack.up`) and report both endpoint views.

        A stack already up (adopted, or up before an attempt failed): its facts only."""
        stack = self.stack
        up = self.adopted or stack.pgids()
        return self._facts(stack.endpoints if up else guarded(stack.up))

    def redeploy(self) -> None:
        """Restart the service behind the scenario's readiness gate."""
        guarded(self.stack.redeploy)

    def down(self) -> list[str]:
        """Tear down and verify; what is left."""
        return down_owned(self.stack, self.stack.run_dir)


class LocalTopologies:
    """The local `TopologyProvider` (settings from the environment on first use)."""

    def __init__(self, settings: DeployerSettings | None = None) -> None:
        self._settings = settings

    @property
    def settings(self) -> DeployerSettings:
        """The settings in force (`SREFORGE_DEPLOYER_*`), read on first use."""
        if self._settings is None:
            self._settings = DeployerSettings()
        return self._settings

    def open(self, event: RunRequested) -> LocalTopology:
        """The run's `LocalStack`, not started."""
        settings = self.settings
        return LocalTopology(guarded(lambda: stack_for(LocalStack, event, settings)))

    def adopt(self, run_id: str) -> LocalTopology:
        """Take over the run's stack from its state file (its deployer has stopped)."""
        settings = self.settings

        def build() -> LocalStack:
            record = read_record(settings.runs_root / run_id)
            if record is None:
                raise StackLostError(f"run {run_id}: no stack state under {settings.runs_root}")
            if record.owner_pid != os.getpid() and owner_alive(record):
                raise StackLostError(
                    f"run {run_id}: its stack is held by live process {record.owner_pid}"
                )
            return adopt_stack(
                find_scenario_dir(settings.use_cases, record.scenario_id),
                record,
                settings=settings,
                webhook_url=settings.alert_webhook_base,
                webhook_token_file=settings.alert_token_file,
            )

        return LocalTopology(guarded(build), adopted=True)

    def checkout(self, target: CiTarget, *, confined: bool) -> HostCheckout:
        """A clone of the run workspace at its base commit (the gate's, on the host)."""
        return host_checkout(target, self.settings, confined=confined)

    def down_elsewhere(self, run_id: str) -> list[str]:
        """Tear down from the run's state file (a stack another process started)."""
        settings = self.settings
        return down_recorded(settings.runs_root / run_id, settings.teardown_timeout_seconds)

    def leftovers(self, run_id: str) -> list[str]:
        """Whether the run's dir is still there."""
        return leftovers({}, {}, self.settings.runs_root / run_id)
