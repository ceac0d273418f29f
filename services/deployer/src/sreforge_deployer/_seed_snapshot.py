"""Seeded data made once per stack version: a content-addressed snapshot of what the seed wrote.

A run's seed is deterministic harness work on a tree the harness built (before the agent
has it), so its output is a function of its inputs: the seed's command line with the run's
own folders taken out, its environment, and the workspace's git tree. The first run of a
stack version seeds and keeps a copy of the data folder under the snapshot's key (written
beside, renamed into place: a reader never sees half of one); every later run copies the
snapshot instead of seeding. A lock file per key makes concurrent first runs seed once.
The seed of a submitted tree (the patch judge's) is agent code and never comes from here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

from sreforge_deployer._process import LaunchSpec, run_once
from sreforge_deployer._wiring import Wiring
from sreforge_deployer._workspace import Workspace

__all__ = ["seed_key", "seed_run", "seed_with_snapshot"]

_DATA, _TREE = "<data>", "<workspace>"


def seed_run(wiring: Wiring, workspace: Workspace) -> None:
    """Run the stack's seed, if it has one, on the harness-built `workspace` into the run's
    data folder; from the stack version's snapshot when the settings allow and there is one
    (a seed outside the workspace has no tree to key it by: it always runs)."""
    launch = wiring.seed_launch()
    if launch is None:
        return
    settings, data_dir = wiring.settings, wiring.data_dir
    if not settings.seed_snapshots or launch.cwd != workspace.path:
        run_once(launch)
        return
    tree = workspace.git("rev-parse", "HEAD^{tree}")
    key = seed_key(launch, data_dir=data_dir, workspace=workspace.path, tree=tree)
    seed_with_snapshot(launch, data_dir, settings.cache_at / "seeds", key)


def seed_key(launch: LaunchSpec, *, data_dir: Path, workspace: Path, tree: str) -> str:
    """The snapshot's key: the seed's command, cwd and env with the run's folders named
    generically, and the git tree (`tree`) of the `workspace` it runs on."""

    def neutral(text: str) -> str:
        return text.replace(str(data_dir), _DATA).replace(str(workspace), _TREE)

    inputs = {
        "argv": [neutral(arg) for arg in launch.argv],
        "cwd": neutral(str(launch.cwd)),
        "env": {key: neutral(value) for key, value in sorted(launch.env.items())},
        "tree": tree,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]


def seed_with_snapshot(launch: LaunchSpec, data_dir: Path, snapshots: Path, key: str) -> bool:
    """Fill `data_dir` from the snapshot `key` under `snapshots`, seeding (and keeping a
    snapshot) first if there is none; `True` when the data came from an earlier seed."""
    snapshot = snapshots / key
    if not snapshot.is_dir():
        snapshots.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(snapshots / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not snapshot.is_dir():
                run_once(launch)
                _keep(data_dir, snapshot)
                return False
    shutil.copytree(snapshot, data_dir, symlinks=True, dirs_exist_ok=True)
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    with launch.log_path.open("a") as log:
        log.write(f"seeded from snapshot {key}\n")
    return True


def _keep(data_dir: Path, snapshot: Path) -> None:
    scratch = snapshot.with_name(f".{snapshot.name}.{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(data_dir, scratch, symlinks=True)
    scratch.rename(snapshot)
