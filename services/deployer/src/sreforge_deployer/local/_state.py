"""The state file (`stack.json`) a stack keeps in its run dir, for `stack down` elsewhere."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field

from sreforge_deployer._run import owner_running

__all__ = [
    "STATE_FILE",
    "GroupRecord",
    "StackRecord",
    "list_records",
    "live_groups",
    "owner_alive",
    "read_record",
]

STATE_FILE = "stack.json"


class GroupRecord(BaseModel):
    """A component's process group, with its leader's start time to spot pid reuse."""

    model_config = ConfigDict(extra="forbid")

    pgid: int
    leader_started_at: float


class StackRecord(BaseModel):
    """What another process needs to find and tear down a stack."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    scenario_id: str
    run_dir: Path
    owner_pid: int
    owner_started_at: float | None = None
    """The owner's start time (None in older records): a reused pid is not the owner."""
    time_scale: float
    port_lock_dir: Path | None = None
    ports: dict[str, int] = Field(default_factory=dict)
    groups: dict[str, GroupRecord] = Field(default_factory=dict)
    agent_endpoints: dict[str, str] = Field(default_factory=dict)
    operator_endpoints: dict[str, str] = Field(default_factory=dict)
    built_commit: str | None = None
    """The workspace HEAD after it was built, before any fault delivered at arm time."""
    base_commit: str | None = None
    """Set once armed: the commit the agent starts from."""
    fault_commit: str | None = None
    armed_at: datetime | None = None
    """When the load resumed on the faulted build; None until armed (a restarted deployer
    adopting the stack reads these back instead of arming twice)."""
    engine_home: Path | None = None
    """The `SREFORGE_HOME` of the engine that started the stack; None in older records.

    The runs root is shared by every home, so `stack down --all` tears down only the
    stacks of its own home."""

    dies_with_owner: bool = False
    """Torn down once its owner is gone, by the owner's warden or the next engine start
    (`reap_orphans`); False: a restarted deployer may adopt it, so it is left alone."""

    def owned_by(self, home: Path) -> bool:
        """Whether this stack was started from engine home `home` (False when unrecorded)."""
        return self.engine_home is not None and _same(self.engine_home, home)

    def write(self) -> None:
        """Atomically (re)write the record into its run dir."""
        path = self.run_dir / STATE_FILE
        scratch = path.with_suffix(".tmp")
        scratch.write_text(self.model_dump_json(indent=2))
        os.replace(scratch, path)


def _same(one: Path, other: Path) -> bool:
    return one.expanduser().resolve() == other.expanduser().resolve()


def owner_alive(record: StackRecord) -> bool:
    """Whether the stack's owner still runs (`owner_running`: its pid and start time)."""
    return owner_running(record.owner_pid, record.owner_started_at)


def read_record(run_dir: Path) -> StackRecord | None:
    """The record in `run_dir`, or None when there is none (or it is unreadable)."""
    try:
        return StackRecord.model_validate(json.loads((run_dir / STATE_FILE).read_text()))
    except (FileNotFoundError, ValueError):
        return None


def list_records(runs_root: Path) -> list[StackRecord]:
    """Every readable stack record under `runs_root`, sorted by run id."""
    if not runs_root.is_dir():
        return []
    records = [read_record(child) for child in runs_root.iterdir() if child.is_dir()]
    return sorted((r for r in records if r is not None), key=lambda r: r.run_id)


def live_groups(pgids: dict[str, int]) -> dict[str, GroupRecord]:
    """Each component's group whose leader still runs, with the leader's start time."""
    groups = {}
    for name, pgid in pgids.items():
        with contextlib.suppress(psutil.NoSuchProcess):
            groups[name] = GroupRecord(
                pgid=pgid, leader_started_at=psutil.Process(pgid).create_time()
            )
    return groups
