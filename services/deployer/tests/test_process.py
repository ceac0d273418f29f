"""Process groups: finding their live members, stopping them, the Go servers' runtime env."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
from sreforge_deployer import DeployerSettings
from sreforge_deployer._observability import go_runtime_env
from sreforge_deployer._process import group_members, groups_members, stop_groups

from .conftest import poll

# A leader that ignores SIGTERM and keeps one child in its group (both sleep).
_STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def groups() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Leaders started in their own sessions; whatever is left is killed at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    stop_groups([proc.pid for proc in started], 5.0, term_grace_seconds=0.0)
    for proc in started:
        proc.wait(timeout=10)


def _stubborn_group(started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    leader = subprocess.Popen(
        [sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE, start_new_session=True
    )
    started.append(leader)
    assert leader.stdout is not None
    assert leader.stdout.readline() == b"ready\n"
    return leader


def test_one_scan_finds_every_member_of_each_group(
    groups: list[subprocess.Popen[bytes]],
) -> None:
    """Each group lists its leader and its child, and only those; unknown groups are empty."""
    first, second = _stubborn_group(groups), _stubborn_group(groups)

    def complete() -> dict[int, list[psutil.Process]] | None:
        found = groups_members([first.pid, second.pid, 999_999_999])
        return found if all(len(found[p.pid]) == 2 for p in (first, second)) else None

    found = poll(complete, timeout=30, message="both groups show their leader and its child")
    for leader in (first, second):
        pids = {proc.pid for proc in found[leader.pid]}
        assert leader.pid in pids
        assert pids == {leader.pid} | {c.pid for c in psutil.Process(leader.pid).children()}
    assert found[999_999_999] == []


def test_an_unreaped_exited_leader_is_not_a_member(groups: list[subprocess.Popen[bytes]]) -> None:
    """A zombie (exited, not yet waited for) counts as gone: teardown must not wait on it."""
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    groups.append(leader)
    poll(
        lambda: psutil.Process(leader.pid).status() == psutil.STATUS_ZOMBIE,
        timeout=30,
        message="the leader exits and stays unreaped",
        interval=0.05,
    )
    assert group_members(leader.pid) == []


def test_term_grace_bounds_the_wait_before_kill(groups: list[subprocess.Popen[bytes]]) -> None:
    """A group that ignores SIGTERM is killed after the grace, not after the full timeout."""
    leader = _stubborn_group(groups)
    started = time.monotonic()
    survivors = stop_groups([leader.pid], 60.0, term_grace_seconds=0.2)
    assert survivors == []
    assert time.monotonic() - started < 30.0, "waited for the timeout, not the grace"
    assert leader.wait(timeout=10) == -9, "the leader ignored TERM and was killed"
    assert group_members(leader.pid) == []


def test_go_runtime_env_passes_only_what_is_set() -> None:
    """GOGC/GOMEMLIMIT reach the Go servers as configured; an empty value leaves Go's default."""
    assert go_runtime_env(DeployerSettings()) == {"GOGC": "50"}
    tuned = DeployerSettings(observability_gogc="", observability_gomemlimit="40MiB")
    assert go_runtime_env(tuned) == {"GOMEMLIMIT": "40MiB"}
