"""The state file (`compose.json`) a compose stack keeps in its run dir, for teardown elsewhere."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["COMPOSE_STATE_FILE", "ComposeRecord", "read_compose_record"]

COMPOSE_STATE_FILE = "compose.json"


class ComposeRecord(BaseModel):
    """What another process needs to find a run's project and free its port leases, and,
    once the boot finished (`booted`), to adopt the stack (`_compose_adopt`)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    project: str
    run_dir: Path
    owner_pid: int
    owner_started_at: float | None = None
    """The owner's start time (None in older records): a reused pid is not the owner."""
    port_lock_dir: Path | None = None
    ports: dict[str, int] = Field(default_factory=dict)
    engine_home: Path | None = None
    scenario_id: str | None = None
    time_scale: float = 1.0
    webhook_route: str | None = None
    image: str = ""
    booted: bool = False
    base_commit: str | None = None
    fault_commit: str | None = None
    armed_at: datetime | None = None

    def write(self) -> None:
        """Atomically (re)write the record into its run dir."""
        path = self.run_dir / COMPOSE_STATE_FILE
        scratch = path.with_suffix(".tmp")
        scratch.write_text(self.model_dump_json(indent=2))
        os.replace(scratch, path)


def read_compose_record(run_dir: Path) -> ComposeRecord | None:
    """The record in `run_dir`, or None when there is none (or it is unreadable)."""
    try:
        return ComposeRecord.model_validate(json.loads((run_dir / COMPOSE_STATE_FILE).read_text()))
    except (FileNotFoundError, ValueError):
        return None
