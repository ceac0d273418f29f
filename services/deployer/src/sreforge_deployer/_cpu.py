"""A component's CPU limit, enforced by the kernel's CFS quota on the host side of its jail.

A service that burns every core starves the harness that measures it (the load
generator, Prometheus, the oracle), and a starved harness ends a failing run `error`
(the oracle's `harness_unstarved`), which a campaign reruns: an agent could turn its own
`failed` into reruns for ever. So the service's CPU is bounded, and its own throttling is
visible: a limited component starts inside a CPU cgroup of the run's own, named
`sreforge-<run id>-<component>` like its memory cgroup (`_memory.py`), under the
deployer's own CPU cgroup (cgroup v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`, or v2
`cpu.max`). Everything it forks stays in it; the jail shows no `/sys` and drops every
capability, so nothing the workspace runs can raise the quota or leave. The oracle reads
the same cgroup (`cpu.stat`'s throttled time, its tasks' `schedstat`) to tell a host the
service starved from one the harness starved. Without a CPU controller this process may
use, `create` raises `CpuLimitError` and the component does not start (never unlimited).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from sreforge_deployer._errors import DeployerError

__all__ = ["CpuLimit", "CpuLimitError", "remove_run_cpu_cgroups"]

PERIOD_US = 100_000
"""The CFS enforcement period: the quota is granted per 100 ms (the kernel's default)."""
_PREFIX = "sreforge-"
_REMOVE_POLL_SECONDS = 0.05


class CpuLimitError(DeployerError):
    """The host offers no CPU cgroup this process may create (the limit cannot hold)."""


@dataclass(frozen=True)
class _Hierarchy:
    parent: Path
    """The deployer's own CPU cgroup: the run's cgroups are made under it."""
    v2: bool


def _hierarchy() -> _Hierarchy:
    """Where this process's CPU cgroup is, and whether it is cgroup v2."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount_point, kind, options, *_ = line.split()
        if kind == "cgroup" and "cpu" in options.split(",") and "cpu" in own:
            return _Hierarchy(_below(Path(mount_point), own["cpu"]), v2=False)
        if kind == "cgroup2" and "" in own:
            parent = _below(Path(mount_point), own[""])
            listed = parent / "cgroup.controllers"
            if listed.is_file() and "cpu" in listed.read_text().split():
                return _Hierarchy(parent, v2=True)
    raise CpuLimitError("no cpu cgroup controller is mounted for this process")


def _below(mount_point: Path, path: str) -> Path:
    # A cgroup namespace shows the own cgroup as "/"; the mount then starts there too.
    nested = mount_point / path.lstrip("/")
    return nested if nested.is_dir() else mount_point


@dataclass(frozen=True)
class CpuLimit:
    """The CPU limit of one component of one run (in cores), and its cgroup."""

    name: str
    cores: float

    def create(self) -> Path:
        """Make (or reuse, on a restart) the cgroup with its quota; its `cgroup.procs`."""
        hierarchy = _hierarchy()
        folder = hierarchy.parent / self.name
        quota = max(1000, round(self.cores * PERIOD_US))
        try:
            folder.mkdir(exist_ok=True)
            if hierarchy.v2:
                (folder / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (folder / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError as error:
            raise CpuLimitError(f"cannot limit CPU in {folder}: {error}") from error
        return folder / "cgroup.procs"


def enter(procs: tuple[Path, ...]) -> None:
    """Move the calling process into each cgroup (run in the child before exec)."""
    for path in procs:
        path.write_text(str(os.getpid()))


def remove_run_cpu_cgroups(run_id: str, timeout_seconds: float = 5.0) -> list[str]:
    """Remove the CPU cgroups of run `run_id` (their processes already stopped); return
    those still there after `timeout_seconds`."""
    try:
        parent = _hierarchy().parent
    except (CpuLimitError, OSError):
        return []
    folders = sorted(parent.glob(f"{_PREFIX}{run_id}-*"))
    deadline = time.monotonic() + timeout_seconds
    while folders:
        for folder in list(folders):
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:  # busy: a process of it not reaped yet
                continue
            folders.remove(folder)
        if not folders or time.monotonic() > deadline:
            break
        time.sleep(_REMOVE_POLL_SECONDS)
    return [str(folder) for folder in folders]
