"""No stack outlives its owner: the warden tears down a dead owner's stacks, and an
engine start reaps those whose warden died too; adoptable stacks are left alone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sreforge_deployer._run import own_start_time
from sreforge_deployer.local import StackRecord, list_stacks, reap_orphans
from sreforge_deployer.local._state import live_groups

from .conftest import poll

_OWNER = """
import sys, time
from pathlib import Path
from sreforge_deployer.local import watch_owner
watch_owner(Path(sys.argv[1]))
print("watched", flush=True)
time.sleep(600)
"""


def _dead_owner() -> tuple[int, float]:
    """The pid and start time of a process that has ended."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(done.pid).create_time()
    done.wait(timeout=30)
    return done.pid, started


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stand-ins for a stack's components: each a process group of its own."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _stack(
    root: Path,
    run_id: str,
    owner: tuple[int, float],
    sleepers: list[subprocess.Popen[bytes]],
    *,
    dies_with_owner: bool = True,
) -> StackRecord:
    """A stack record under `root` whose one component is a fresh `sleep` group."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    sleepers.append(proc)
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    record = StackRecord(
        run_id=run_id,
        scenario_id="tiny-ok",
        run_dir=run_dir,
        owner_pid=owner[0],
        owner_started_at=owner[1],
        time_scale=0.1,
        groups=live_groups({"app": proc.pid}),
        dies_with_owner=dies_with_owner,
    )
    record.write()
    return record


@pytest.mark.timeout(60)
def test_reaping_takes_down_only_orphans_that_die_with_their_owner(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """A dead owner's `dies_with_owner` stack is torn down; a live owner's, and one a
    restarted deployer may adopt, are left."""
    dead, alive = _dead_owner(), (os.getpid(), own_start_time())
    orphan = _stack(tmp_path, "run-orphan", dead, sleepers)
    held = _stack(tmp_path, "run-held", alive, sleepers)
    adoptable = _stack(tmp_path, "run-adoptable", dead, sleepers, dies_with_owner=False)
    reaped = reap_orphans(tmp_path)
    assert [one.record.run_id for one in reaped] == ["run-orphan"]
    assert "is gone; torn down, nothing left" in str(reaped[0])
    assert not orphan.run_dir.exists()
    assert sleepers[0].wait(timeout=10) is not None
    assert [r.run_id for r in list_stacks(tmp_path)] == ["run-adoptable", "run-held"]
    assert [proc.poll() for proc in sleepers[1:]] == [None, None]
    assert [held.run_dir.exists(), adoptable.run_dir.exists()] == [True, True]


@pytest.mark.timeout(60)
def test_a_reused_pid_is_not_mistaken_for_the_owner(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """The owner's pid now runs another process (a different start time): still an orphan."""
    record = _stack(tmp_path, "run-reused", (os.getpid(), own_start_time() - 100), sleepers)
    assert [one.record.run_id for one in reap_orphans(tmp_path)] == ["run-reused"]
    assert not record.run_dir.exists()


@pytest.mark.timeout(60)
def test_the_warden_tears_down_its_owners_stacks_when_the_owner_is_killed(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """SIGKILL leaves the owner no say: its warden sees the pipe close and tears down the
    owner's stacks at once, saying so on the owner's stderr; another owner's stay."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline() == "watched\n"
        started = psutil.Process(owner.pid).create_time()
        mine = _stack(tmp_path, "run-mine", (owner.pid, started), sleepers)
        other = _stack(tmp_path, "run-other", (os.getpid(), own_start_time()), sleepers)
        os.kill(owner.pid, signal.SIGKILL)
        poll(lambda: not mine.run_dir.exists(), timeout=20, message="the warden reaped")
        assert sleepers[0].wait(timeout=10) is not None
        _, stderr = owner.communicate(timeout=20)  # the warden shares it: ends with it
        assert "stack run-mine (tiny-ok): its owner" in stderr
        assert "torn down, nothing left" in stderr
        assert other.run_dir.exists()
        assert sleepers[1].poll() is None
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=10)


@pytest.mark.timeout(60)
def test_a_clean_exit_takes_the_warden_with_it(tmp_path: Path) -> None:
    """An owner that ends cleanly ends its warden on the way out: no process of a
    finished command is left behind."""
    script = _OWNER.replace("time.sleep(600)", "")
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        stdout=subprocess.PIPE,  # the warden shares only stderr: this pipe ends with the owner
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=30,
        check=True,
    )
    assert done.stdout == "watched\n"
    wardens = [
        proc
        for proc in psutil.process_iter(["cmdline"])
        if "reap_after" in " ".join(proc.info["cmdline"] or ())
        and str(tmp_path) in " ".join(proc.info["cmdline"] or ())
    ]
    assert not wardens, "the warden outlived its owner's clean exit"
