"""How a scenario's fault reaches the service, whatever topology runs it.

`baked_patches` are committed into the workspace as it is built (setup-baked and
arm-runtime-notrace); `deliver_at_arm` is the arm step's part: commit the recent
patches or pick the runtime environment, and say whether the service must restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sreforge_deployer._spec import ScenarioSetup
from sreforge_deployer._workspace import Workspace

__all__ = ["ArmDelivery", "baked_patches", "deliver_at_arm"]

_BAKED_MODES = ("setup-baked", "arm-runtime-notrace")
_RECENT_MODES = ("arm-deploy-recent", "multi-commit")


@dataclass(frozen=True)
class ArmDelivery:
    """What arming changed: the fault's commit, the service's runtime env, a restart owed."""

    fault_commit: str | None = None
    runtime_env: dict[str, str] = field(default_factory=dict)
    restart: bool = False


def baked_patches(setup: ScenarioSetup) -> list[Path]:
    """The patches the workspace is built with (empty unless the mode bakes them in)."""
    return list(setup.inject_patches) if setup.delivery_mode in _BAKED_MODES else []


def deliver_at_arm(
    setup: ScenarioSetup, workspace: Workspace, *, built: str | None = None
) -> ArmDelivery:
    """Deliver the fault per DELIVERY_MODE; the caller restarts the service if owed.

    `built` is the workspace's HEAD as built: a HEAD past it (an adopted stack whose
    arming was cut short after the commit) already carries the recent fault.
    """
    mode = setup.delivery_mode
    if mode in _RECENT_MODES:
        if built is not None and workspace.head() != built:
            return ArmDelivery(fault_commit=workspace.head(), restart=True)
        deliver = workspace.deliver_series if mode == "multi-commit" else workspace.deliver_recent
        created = deliver(setup.inject_patches)
        return ArmDelivery(fault_commit=created[-1] if created else None, restart=True)
    if mode == "arm-runtime-notrace":
        return ArmDelivery(runtime_env=dict(setup.runtime_env), restart=True)
    return ArmDelivery()
