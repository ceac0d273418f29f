"""The agent's process: its own process group, a wall budget, and the whole group killed.

On budget expiry the group gets SIGTERM, then SIGKILL after a grace period. When
the leader exits on its own, whatever it left running in its group is killed too,
so nothing of the agent outlives its session. (A process that leaves the group with
`setsid` escapes this; the bubblewrap sandbox's PID namespace closes that gap.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessOutcome", "kill_group", "run_in_group"]


@dataclass(frozen=True)
class ProcessOutcome:
    """How the agent's process ended: exit code, whether the budget fired, wall time."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    pgid: int


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal every process of group `pgid`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def run_in_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    budget_s: float,
    log_path: Path,
    grace_s: float = 2.0,
    on_start: Callable[[int], None] | None = None,
) -> ProcessOutcome:
    """Run `argv` as the leader of a new process group, output appended to `log_path`."""
    started = time.monotonic()
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pgid = process.pid
    if on_start is not None:
        on_start(pgid)
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), budget_s)
        except TimeoutError:
            timed_out = True
            kill_group(pgid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), grace_s)
            except TimeoutError:
                kill_group(pgid, signal.SIGKILL)
                await process.wait()
    finally:
        # Leftover children (and a leader still alive on cancellation) die with the session.
        kill_group(pgid, signal.SIGKILL)
    return ProcessOutcome(
        exit_code=process.returncode,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        pgid=pgid,
    )
