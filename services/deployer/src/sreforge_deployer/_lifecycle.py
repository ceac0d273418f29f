"""What arming, a redeploy and the load's start do, in which order, on any stack.

The decisions live here once; a stack (`LocalStack`, `ComposeStack`) only offers the
effects (`StackEffects`): a POST to its load generator, a wait for Prometheus to move past
a moment, a restart of its service. So the two topologies cannot drift apart on when the
load pauses, when the confirm-fire clock starts or what a warm-up's settling waits for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sreforge_deployer._delivery import deliver_at_arm
from sreforge_deployer._spec import ComponentSpec, ScenarioSetup
from sreforge_deployer._workspace import Workspace

__all__ = ["Armed", "LoadControl", "StackEffects", "arm", "redeploy", "start_load"]

# A warm-up walks the whole working set (cold misses on the upstream): it takes a while.
WARMUP_TIMEOUT_SECONDS = 120.0


class StackEffects(Protocol):
    """The I/O a stack offers the lifecycle; no decision is taken behind these calls."""

    def post_load(self, path: str, timeout: float = 5.0) -> None:
        """POST `path` on the run's load generator (`LoadControlError` unless 2xx)."""
        ...

    def settle(self, since: float) -> None:
        """Wait until every rule window requests feed has moved past `since` (epoch s)."""
        ...

    def restart_service(self, runtime_env: Mapping[str, str]) -> None:
        """Restart the service from the workspace's tree with `runtime_env`, health-gated."""
        ...


@dataclass(frozen=True, slots=True)
class LoadControl:
    """The load generator's control paths (`stack.toml`: `pause`, `resume`, `warmup`)."""

    pause: str
    resume: str
    warmup: str | None = None

    @classmethod
    def of(cls, component: ComponentSpec | None) -> LoadControl | None:
        """The stack's load generator's paths; None when it has none."""
        if component is None or component.pause is None or component.resume is None:
            return None
        return cls(component.pause, component.resume, component.warmup)


@dataclass(frozen=True, slots=True)
class Armed:
    """What arming did: the commits, the service's runtime env from now on, the clock."""

    base_commit: str
    fault_commit: str | None
    runtime_env: dict[str, str]
    armed_at: datetime


def arm(
    effects: StackEffects,
    setup: ScenarioSetup,
    workspace: Workspace,
    load: LoadControl | None,
    *,
    built: str | None = None,
) -> Armed:
    """Pause the load, deliver the fault (restarting the service if it is owed), start
    the load on the faulted build. `armed_at` is when the load resumed: the confirm-fire
    clock starts when load hits the faulted build, not before the warm-up settled."""
    if load is not None:
        effects.post_load(load.pause)
    delivery = deliver_at_arm(setup, workspace, built=built)
    if delivery.restart:
        effects.restart_service(delivery.runtime_env)
    base_commit = workspace.head()
    armed_at = start_load(effects, load) if load is not None else datetime.now(UTC)
    return Armed(base_commit, delivery.fault_commit, delivery.runtime_env, armed_at)


def start_load(effects: StackEffects, load: LoadControl) -> datetime:
    """Warm the service's working set, let the warm-up age out of the rules, resume the
    load; when it resumed.

    The warm-up's cold misses are real requests in the service's histogram; resuming only
    once every rule window has moved past the end of the warm-up keeps a healthy build
    from paging on its own warm-up (the readiness gate's drain/deploy/warm/resume).
    """
    if load.warmup:
        effects.post_load(load.warmup, timeout=WARMUP_TIMEOUT_SECONDS)
        effects.settle(time.time())
    resumed_at = datetime.now(UTC)
    effects.post_load(load.resume)
    return resumed_at


def redeploy(
    effects: StackEffects,
    load: LoadControl | None,
    runtime_env: Mapping[str, str],
    *,
    readiness_gate: bool,
) -> float:
    """Restart the service from the workspace's tree; seconds taken.

    Behind the readiness gate (and with a load generator): pause the load, restart cold,
    warm the working set, resume. Without it the load keeps running through the restart.
    """
    gated = load if readiness_gate else None
    started = time.monotonic()
    if gated is not None:
        effects.post_load(gated.pause)
    effects.restart_service(runtime_env)
    if gated is not None:
        start_load(effects, gated)
    return time.monotonic() - started
