"""A component's memory limit, enforced by the kernel on the host side of its jail.

A limited component is started inside a memory cgroup of the run's own (cgroup v1
`memory.limit_in_bytes`, or v2 `memory.max`), made under the deployer's own cgroup and
named `sreforge-<run id>-<component>`; everything it forks stays in it. Past the limit
the kernel's OOM killer kills the largest process of the cgroup (gunicorn's worker, not
its small master), as a container runtime's memory limit does. The service's jail
mounts no `/sys`, runs in a cgroup namespace of its own with every capability dropped,
so nothing the workspace runs can raise the limit or leave the cgroup. Teardown removes
the run's cgroups only (`remove_run_cgroups`), by that name prefix. Measured on cgroup
v1 only; on v2 the deployer's cgroup must delegate `memory` to its children
(`cgroup.subtree_control`), else `create` raises `MemoryLimitError` and the component
does not start (never unlimited).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sreforge_deployer._errors import DeployerError

__all__ = ["MemoryLimit", "MemoryLimitError", "cgroup_name", "remove_run_cgroups"]

_MB = 1024 * 1024
_PREFIX = "sreforge-"
_REMOVE_POLL_SECONDS = 0.05


class MemoryLimitError(DeployerError):
    """The host offers no memory cgroup this process may create (the limit cannot hold)."""


def cgroup_name(run_id: str, component: str) -> str:
    """The cgroup of `component` in run `run_id`."""
    return f"{_PREFIX}{run_id}-{component}"


@dataclass(frozen=True)
class _Hierarchy:
    parent: Path
    """The deployer's own memory cgroup: the run's cgroups are made under it."""
    limit_file: str
    """`memory.limit_in_bytes` (v1) or `memory.max` (v2)."""


def _hierarchy() -> _Hierarchy:
    """Where this process's memory cgroup is, and which file limits its children."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    for mount_point, kind, options in _cgroup_mounts():
        if kind == "cgroup" and "memory" in options and "memory" in own:
            return _Hierarchy(_below(mount_point, own["memory"]), "memory.limit_in_bytes")
        if kind == "cgroup2" and "" in own:
            parent = _below(mount_point, own[""])
            listed = parent / "cgroup.controllers"
            if listed.is_file() and "memory" in listed.read_text().split():
                return _Hierarchy(parent, "memory.max")
    raise MemoryLimitError("no memory cgroup controller is mounted for this process")


def _cgroup_mounts() -> list[tuple[Path, str, set[str]]]:
    mounts = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount_point, kind, options, *_ = line.split()
        if kind in ("cgroup", "cgroup2"):
            mounts.append((Path(mount_point), kind, set(options.split(","))))
    return mounts


def _below(mount_point: Path, path: str) -> Path:
    # A cgroup namespace shows the own cgroup as "/"; the mount then starts there too.
    nested = mount_point / path.lstrip("/")
    return nested if nested.is_dir() else mount_point


@dataclass(frozen=True)
class MemoryLimit:
    """The limit of one component of one run, and its cgroup."""

    name: str
    megabytes: int

    def folder(self) -> Path:
        """The cgroup's folder (made by `create`)."""
        return _hierarchy().parent / self.name

    def create(self) -> Path:
        """Make (or reuse, on a restart) the cgroup with its limit; its `cgroup.procs`."""
        hierarchy = _hierarchy()
        folder = hierarchy.parent / self.name
        try:
            folder.mkdir(exist_ok=True)
            (folder / hierarchy.limit_file).write_text(str(self.megabytes * _MB))
        except OSError as error:
            raise MemoryLimitError(f"cannot limit memory in {folder}: {error}") from error
        swap = folder / "memory.memsw.limit_in_bytes"
        if swap.exists():  # v1 with swap accounting: swapping is no way past the limit
            with contextlib.suppress(OSError):
                swap.write_text(str(self.megabytes * _MB))
        return folder / "cgroup.procs"

    @staticmethod
    def enter(procs: Path) -> None:
        """Move the calling process into the cgroup (run in the child before exec)."""
        procs.write_text(str(os.getpid()))


def remove_run_cgroups(run_id: str, timeout_seconds: float = 5.0) -> list[str]:
    """Remove the cgroups of run `run_id` (their processes already stopped); return those
    still there after `timeout_seconds` (the kernel frees a cgroup once its last process
    is reaped)."""
    try:
        parent = _hierarchy().parent
    except (MemoryLimitError, OSError):
        return []
    folders = sorted(parent.glob(f"{cgroup_name(run_id, '')}*"))
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
