"""A stack record's owner: alive only while the process that wrote it runs (pid reuse)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sreforge_deployer._run import own_start_time
from sreforge_deployer.local._state import StackRecord, owner_alive


def _record(pid: int, started: float | None) -> StackRecord:
    return StackRecord(
        run_id="run-owner-1",
        scenario_id="tiny-ok",
        run_dir=Path("/nonexistent/run-owner-1"),
        owner_pid=pid,
        owner_started_at=started,
        time_scale=1.0,
    )


def test_the_owner_is_alive_while_the_process_that_wrote_the_record_runs() -> None:
    """This process, with its own start time, owns the record."""
    assert owner_alive(_record(os.getpid(), own_start_time()))


def test_a_reused_pid_is_not_the_owner() -> None:
    """A live process whose start time differs (the owner was killed and its pid handed
    to another process) is not the owner; an older record without a start time trusts
    the pid alone."""
    assert not owner_alive(_record(os.getpid(), own_start_time() - 3600))
    assert owner_alive(_record(os.getpid(), None))


def test_a_gone_owner_is_not_alive() -> None:
    """An exited (and reaped) owner is not alive (nor whoever got its pid since)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert not owner_alive(_record(int(done.stdout), own_start_time()))
