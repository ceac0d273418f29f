"""How a scenario's fault reaches the service, whatever topology runs it.

`baked_patches` are committed into the workspace as it is built (setup-baked; for
arm-runtime-notrace every patch but the last); `deliver_at_arm` is the arm step's part:
commit the recent patches, pick the runtime environment, and say whether the service must
restart.

arm-runtime-notrace's fault is the runtime override alone (no trace in git). Its last
inject patch, when it has any, is an *innocent* deploy delivered at arm time, dated now,
the obvious suspect; the patches before it are old history (a feature the override
misuses), baked in like setup-baked's. The override stays in the service's environment
for every later restart, the agent's redeploy included, so reverting the innocent deploy
cannot help.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sreforge_deployer._spec import ScenarioSetup
from sreforge_deployer._workspace import Workspace

__all__ = ["ArmDelivery", "baked_patches", "deliver_at_arm"]

_RECENT_MODES = ("arm-deploy-recent", "multi-commit")


@dataclass(frozen=True)
class ArmDelivery:
    """What arming changed: the fault's commit, the service's runtime env, a restart owed."""

    fault_commit: str | None = None
    runtime_env: dict[str, str] = field(default_factory=dict)
    restart: bool = False


def baked_patches(setup: ScenarioSetup) -> list[Path]:
    """The patches the workspace is built with (empty unless the mode bakes them in)."""
    if setup.delivery_mode == "setup-baked":
        return list(setup.inject_patches)
    if setup.delivery_mode == "arm-runtime-notrace":
        return list(setup.inject_patches[:-1])
    return []


def _recent_patches(setup: ScenarioSetup) -> list[Path]:
    if setup.delivery_mode in _RECENT_MODES:
        return list(setup.inject_patches)
    if setup.delivery_mode == "arm-runtime-notrace":
        return list(setup.inject_patches[-1:])
    return []


def deliver_at_arm(
    setup: ScenarioSetup, workspace: Workspace, *, built: str | None = None
) -> ArmDelivery:
    """Deliver the fault per DELIVERY_MODE; the caller restarts the service if owed.

    `built` is the workspace's HEAD as built: a HEAD past it (an adopted stack whose
    arming was cut short after the commit) already carries the recent fault.
    """
    mode = setup.delivery_mode
    if mode not in (*_RECENT_MODES, "arm-runtime-notrace"):
        return ArmDelivery()
    runtime_env = dict(setup.runtime_env) if mode == "arm-runtime-notrace" else {}
    recent = _recent_patches(setup)
    if not recent:
        return ArmDelivery(runtime_env=runtime_env, restart=True)
    if built is not None and workspace.head() != built:
        return ArmDelivery(fault_commit=workspace.head(), runtime_env=runtime_env, restart=True)
    created = workspace.deliver_recent(recent)
    return ArmDelivery(
        fault_commit=created[-1] if created else None, runtime_env=runtime_env, restart=True
    )
