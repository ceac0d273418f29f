"""A compose stack's owner is its pid and start time, as on the local topology."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from sreforge_deployer import DeployerError, DeployerSettings
from sreforge_deployer._compose_state import ComposeRecord
from sreforge_deployer._compose_topology import ComposeTopologies
from sreforge_deployer.local import LocalTopologies


def _topologies(runs_root: Path) -> ComposeTopologies:
    return ComposeTopologies(LocalTopologies(DeployerSettings(runs_root=runs_root)))


def _held_by_pid_1(runs_root: Path, started_at: float) -> str:
    """What adopting a booted project whose record names pid 1 (always alive) says."""
    run_dir = runs_root / "run-owner-2"
    run_dir.mkdir(parents=True)
    ComposeRecord(
        run_id="run-owner-2",
        project="sreforge-run-owner-2",
        run_dir=run_dir,
        owner_pid=1,
        owner_started_at=started_at,
        scenario_id="no-such-scenario",
        booted=True,
    ).write()
    with pytest.raises(DeployerError) as raised:
        _topologies(runs_root).adopt("run-owner-2")
    return str(raised.value)


def test_a_live_owner_keeps_its_compose_project(tmp_path: Path) -> None:
    """A project whose owner runs (pid and start time match) is not taken over."""
    message = _held_by_pid_1(tmp_path, psutil.Process(1).create_time())
    assert "held by live process 1" in message


def test_a_reused_pid_does_not_hold_a_compose_project(tmp_path: Path) -> None:
    """A live pid that started at another time is not the owner: the adoption goes on
    (and here fails later, on the missing scenario, not on the holder)."""
    message = _held_by_pid_1(tmp_path, psutil.Process(1).create_time() + 3600)
    assert "held by live process" not in message
    assert "no-such-scenario" in message
