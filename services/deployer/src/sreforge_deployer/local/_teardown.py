"""Teardown checks, and tearing down a stack from its state file (another process's)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from sreforge_deployer._errors import DeployerError, TeardownIncompleteError
from sreforge_deployer._memory import remove_run_cgroups
from sreforge_deployer._ports import listening_ports, reap_stale_lease
from sreforge_deployer._process import groups_members, stop_group
from sreforge_deployer._run import remove_run_dir
from sreforge_deployer.local._state import (
    GroupRecord,
    StackRecord,
    list_records,
    owner_alive,
    read_record,
)

__all__ = [
    "TeardownReport",
    "leftovers",
    "list_stacks",
    "teardown_record",
    "teardown_run",
]

_POLL_SECONDS = 0.1
_PORT_CLOSE_SECONDS = 3.0


@dataclass(frozen=True)
class TeardownReport:
    """What a teardown stopped and checked: process groups, ports, run dir, leftovers."""

    groups: dict[str, int]
    ports: dict[str, int]
    run_dir: Path
    leftovers: list[str]


def leftovers(groups: dict[str, int], ports: dict[str, int], run_dir: Path | None) -> list[str]:
    """Human-readable list of what is still there: live processes, listening ports, dir."""
    found = []
    members = groups_members(groups.values())
    for name, pgid in groups.items():
        for proc in members[pgid]:
            found.append(f"process {proc.pid} of component {name!r} (group {pgid})")
    by_port = {port: name for name, port in ports.items()}
    for port in sorted(_still_listening(set(by_port))):
        found.append(f"port 127.0.0.1:{port} ({by_port[port]}) still listening")
    if run_dir is not None and run_dir.exists():
        found.append(f"run directory {run_dir}")
    return found


def _still_listening(ports: set[int]) -> set[int]:
    """Those of `ports` still listened on after `_PORT_CLOSE_SECONDS` at most.

    A multithreaded server (Prometheus, Alertmanager: Go) reads as gone once its main
    thread is a zombie, while its other threads, which hold the listening socket until
    the last of them exits, may still be tearing down on a loaded machine.
    """
    deadline = time.monotonic() + _PORT_CLOSE_SECONDS
    listening = listening_ports(ports)
    while listening and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        listening = listening_ports(listening)
    return listening


def teardown_record(record: StackRecord, *, timeout_seconds: float = 30.0) -> None:
    """Tear down the stack `record` describes, from any process; verify nothing remains.

    A live owner (the `stack up` process) is asked first with SIGTERM so it tears down
    its own children and reaps them; whatever is left after `timeout_seconds` is
    killed here.
    """
    owner = record.owner_pid
    if owner != os.getpid() and owner_alive(record):
        os.kill(owner, signal.SIGTERM)
        deadline = time.monotonic() + timeout_seconds
        while owner_alive(record) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
    groups = {name: group.pgid for name, group in record.groups.items() if _still_ours(group)}
    for pgid in groups.values():
        stop_group(pgid, min(timeout_seconds, 10.0))
    cgroups = remove_run_cgroups(record.run_id)
    remove_run_dir(record.run_dir)
    remaining = leftovers(groups, record.ports, record.run_dir)
    remaining += [f"memory cgroup {path}" for path in cgroups]
    if record.port_lock_dir is not None and not owner_alive(record):
        for port in record.ports.values():
            reap_stale_lease(record.port_lock_dir, port)
    if remaining:
        raise TeardownIncompleteError(record.run_id, remaining)


def _still_ours(group: GroupRecord) -> bool:
    # The kernel never hands out a pid still in use as a pgid, so a group with members
    # is ours unless its leader pid now belongs to a younger, unrelated process.
    try:
        leader = psutil.Process(group.pgid)
    except psutil.NoSuchProcess:
        return True
    return abs(leader.create_time() - group.leader_started_at) < 1.0


def list_stacks(runs_root: Path) -> list[StackRecord]:
    """Stacks with a state file under `runs_root` (started by this or another process)."""
    return list_records(runs_root)


def teardown_run(runs_root: Path, run_id: str, *, timeout_seconds: float = 30.0) -> StackRecord:
    """Tear down the stack `run_id` under `runs_root`; return its record."""
    record = read_record(runs_root / run_id)
    if record is None:
        raise DeployerError(f"no stack {run_id!r} under {runs_root}")
    teardown_record(record, timeout_seconds=timeout_seconds)
    return record
