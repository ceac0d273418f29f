"""A patch scenario's "stack": only the run's workspace, at the scenario's `base_commit`.

A patch run (SPEC §4, seed 000 "patch profile") has no deployment, no load and no
alert. Its `Topology` builds the workspace as an incident's is built (the stack's app
source, the made-up history, the scenario's `inject/` patches baked in) and checks it
out at the pinned `base_commit`; `up()` reports no endpoints, `arm()` only the base
commit, and there is nothing to redeploy (its `CiTarget.redeploys` is False, so the
saga stops after CI). A `patch.json` marker in the run dir lets a restarted deployer adopt the
workspace and tear it down.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from sreforge_contracts import RunRequested, find_scenario

from sreforge_deployer._delivery import baked_patches
from sreforge_deployer._errors import StackLostError, StackSpecError, WorkspaceError
from sreforge_deployer._run import RunLayout, remove_run_dir
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import (
    ScenarioSetup,
    StackSpec,
    find_scenario_dir,
    load_scenario_setup,
    load_stack_spec,
    refuse_postgres,
)
from sreforge_deployer._topology import ArmFacts, CiTarget, StackFacts, guarded
from sreforge_deployer._workspace import Workspace

__all__ = ["MARKER", "PatchTopology", "is_patch_run", "is_patch_scenario"]

MARKER = "patch.json"
"""The run dir's marker of a patch run: scenario id and base commit."""


def is_patch_scenario(use_cases: Path, scenario_id: str) -> bool:
    """Whether `scenario_id` is a patch-profile scenario (False when it cannot be read)."""
    try:
        return find_scenario(use_cases, scenario_id).manifest.profile == "patch"
    except Exception:  # an unreadable scenario: the regular topology's opening says why
        return False


def is_patch_run(run_dir: Path) -> bool:
    """Whether `run_dir` holds a patch run's workspace (its marker)."""
    return (run_dir / MARKER).is_file()


class PatchTopology:
    """One patch run: its workspace at the base commit, nothing running."""

    readiness_gate = False

    def __init__(
        self, setup: ScenarioSetup, spec: StackSpec, base_commit: str, run_dir: Path
    ) -> None:
        self.setup = setup
        self.spec = spec
        self.base_commit = base_commit
        self.layout = RunLayout(run_dir)
        self.armed_at: datetime | None = None

    @classmethod
    def open(cls, event: RunRequested, settings: DeployerSettings) -> PatchTopology:
        """The run's patch topology, nothing built yet; `StackSpecError` if unusable."""
        return guarded(
            lambda: cls._describe(event.scenario, settings.runs_root / event.run_id, settings)
        )

    @classmethod
    def adopt(cls, run_dir: Path, settings: DeployerSettings) -> PatchTopology:
        """A patch run's workspace left by a stopped deployer; `StackLostError` if gone."""
        try:
            marker = json.loads((run_dir / MARKER).read_text())
            scenario_id = str(marker["scenario_id"])
        except (OSError, ValueError, KeyError) as error:
            raise StackLostError(
                f"patch run {run_dir.name}: no readable {MARKER}: {error}"
            ) from None
        topology = guarded(lambda: cls._describe(scenario_id, run_dir, settings))
        if not (topology.layout.workspace / ".git").is_dir():
            raise StackLostError(f"patch run {run_dir.name}: its workspace is gone")
        topology.armed_at = datetime.now(UTC)
        return topology

    @classmethod
    def _describe(
        cls, scenario_id: str, run_dir: Path, settings: DeployerSettings
    ) -> PatchTopology:
        scenario_dir = find_scenario_dir(settings.use_cases, scenario_id)
        setup = load_scenario_setup(scenario_dir)
        refuse_postgres(setup, "the patch profile")
        base = find_scenario(settings.use_cases, scenario_id).manifest.base_commit
        if not base:
            raise StackSpecError(f"scenario {scenario_id}: a patch scenario needs base_commit")
        return cls(setup, load_stack_spec(setup.stack_dir), base, run_dir)

    @property
    def service(self) -> str:
        """The component whose code the agent patches."""
        return self.spec.service

    def up(self) -> StackFacts:
        """Build the workspace and check it out at `base_commit` (a built one: its facts)."""
        workspace = self.layout.workspace
        if not (workspace / ".git").is_dir():
            guarded(self._build)
        return StackFacts(
            stack=self.spec.name,
            run_dir=self.layout.run_dir,
            agent_endpoints={},
            operator_endpoints={},
            workspace=workspace,
            service=self.spec.service,
        )

    def _build(self) -> None:
        run_dir = self.layout.run_dir
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        source = self.spec.root / self.spec.workspace_source
        try:
            workspace = Workspace.build(
                source, self.layout.workspace, baked_patches=baked_patches(self.setup)
            )
            workspace.git("cat-file", "-e", f"{self.base_commit}^{{commit}}")
        except WorkspaceError as error:
            remove_run_dir(run_dir)
            raise WorkspaceError(
                f"scenario {self.setup.scenario_id}: base_commit {self.base_commit} is not in "
                f"the workspace history built from {source} (re-pin it to the built HEAD): "
                f"{error}"
            ) from error
        workspace.reset_to(self.base_commit)
        marker = {"scenario_id": self.setup.scenario_id, "base_commit": self.base_commit}
        (run_dir / MARKER).write_text(json.dumps(marker))

    def arm(self) -> ArmFacts:
        """Nothing to arm: the base commit, handed over now."""
        if self.armed_at is None:
            self.armed_at = datetime.now(UTC)
        return ArmFacts(self.armed_at, self.base_commit, None, self.setup)

    def redeploy(self) -> None:
        """A patch run is never redeployed (the saga stops after CI)."""
        raise WorkspaceError(f"scenario {self.setup.scenario_id}: a patch run has no deployment")

    def ci_target(self) -> CiTarget | None:
        """The workspace and base commit once built."""
        if not (self.layout.workspace / ".git").is_dir():
            return None
        return CiTarget(
            self.layout.workspace, self.base_commit, self.setup.scenario_id, redeploys=False
        )

    def stop_processes(self) -> None:
        """Nothing runs."""

    def down(self) -> list[str]:
        """Remove the run dir; what is left."""
        remove_run_dir(self.layout.run_dir)
        return [f"run directory {self.layout.run_dir}"] if self.layout.run_dir.exists() else []
