"""Tearing a run's stack down for the bus handlers, as a list of what is left (empty = clean)."""

from __future__ import annotations

import os
from pathlib import Path

from sreforge_deployer._errors import DeployerError, TeardownIncompleteError
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import owner_alive, read_record
from sreforge_deployer.local._teardown import leftovers, teardown_record

__all__ = ["down_owned", "down_recorded"]


def down_owned(stack: LocalStack | None, run_dir: Path) -> list[str]:
    """Tear down a stack this process holds (None: only check its run dir is gone)."""
    if stack is None:
        return leftovers({}, {}, run_dir)
    try:
        stack.down()
    except TeardownIncompleteError as incomplete:
        return incomplete.leftovers
    except Exception as error:
        return [f"teardown of run {stack.run_id} failed: {error}"]
    return []


def down_recorded(run_dir: Path, timeout_seconds: float) -> list[str]:
    """Tear down the stack whose state file is in `run_dir`, if there is one.

    A stack owned by another live process is reported, not killed: that process is
    an engine serving other runs.
    """
    record = read_record(run_dir)
    if record is None:
        return leftovers({}, {}, run_dir)
    if record.owner_pid != os.getpid() and owner_alive(record):
        return [f"stack of run {record.run_id} is owned by live process {record.owner_pid}"]
    try:
        teardown_record(record, timeout_seconds=timeout_seconds)
    except TeardownIncompleteError as incomplete:
        return incomplete.leftovers
    except DeployerError as error:
        return [str(error)]
    return []
