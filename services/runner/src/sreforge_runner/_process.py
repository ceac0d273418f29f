"""The agent's process: its own group, three separate budgets, and the whole group killed.

Budgets (wall seconds): `session_start` (spawn → first output), `idle` (the longest
stretch without output, the no-output watchdog) and `total`. The one that fires is
recorded. Then the group gets SIGTERM, and SIGKILL after a grace period. When the
leader exits on its own, whatever it left running in its group is killed too.
(A process that leaves the group with `setsid` escapes this; the bubblewrap
sandbox's PID namespace closes that gap.)

stdout and stderr are read as they come: the raw bytes go to the output log, and
each line, stamped with the harness clock and its stream, to a JSONL transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

__all__ = ["Budgets", "ProcessOutcome", "kill_group", "run_in_group"]

TimeoutKind = Literal["session_start", "idle", "total"]
_DRAIN_S = 2.0


@dataclass(frozen=True)
class Budgets:
    """The separate budgets; None disables the session-start or idle watchdog."""

    total_s: float
    idle_s: float | None = None
    session_start_s: float | None = None


@dataclass(frozen=True)
class ProcessOutcome:
    """How the agent's process ended: exit code, which budget fired, wall time."""

    exit_code: int | None
    timeout: TimeoutKind | None
    duration_s: float
    pgid: int
    saw_output: bool = False

    @property
    def timed_out(self) -> bool:
        """True when one of the budgets fired."""
        return self.timeout is not None


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal every process of group `pgid`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class _Stream:
    """One output pipe, read without blocking, teed to the log and the transcript."""

    name: str
    fd: int
    tee: _Tee
    pending: bytes = b""
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def on_readable(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        self.tee.raw(chunk)
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            self.tee.line(self.name, line)

    def close(self) -> None:
        if self.done.is_set():
            return
        asyncio.get_running_loop().remove_reader(self.fd)
        os.close(self.fd)
        if self.pending:
            self.tee.line(self.name, self.pending, partial=True)
            self.pending = b""
        self.done.set()


@dataclass
class _Tee:
    log: BinaryIO
    transcript: BinaryIO | None
    last_output: float | None = None
    first_output: asyncio.Event = field(default_factory=asyncio.Event)

    def raw(self, chunk: bytes) -> None:
        self.last_output = time.monotonic()
        self.first_output.set()
        self.log.write(chunk)
        self.log.flush()

    def line(self, stream: str, text: bytes, partial: bool = False) -> None:
        if self.transcript is None:
            return
        entry: dict[str, object] = {
            "t": datetime.now(UTC).isoformat(),
            "stream": stream,
            "text": text.decode(errors="replace"),
        }
        if partial:
            entry["partial"] = True
        self.transcript.write(json.dumps(entry).encode() + b"\n")
        self.transcript.flush()


async def run_in_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    budget_s: float | Budgets,
    log_path: Path,
    transcript_path: Path | None = None,
    grace_s: float = 2.0,
    on_start: Callable[[int], None] | None = None,
) -> ProcessOutcome:
    """Run `argv` as the leader of a new group; stdin closed, output teed and stamped."""
    budgets = budget_s if isinstance(budget_s, Budgets) else Budgets(total_s=budget_s)
    with contextlib.ExitStack() as files:
        log = files.enter_context(log_path.open("ab"))
        transcript = files.enter_context(transcript_path.open("ab")) if transcript_path else None
        tee = _Tee(log, transcript)
        streams, write_ends = _pipes(tee)
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=write_ends[0],
                stderr=write_ends[1],
                start_new_session=True,
            )
        except BaseException:
            for stream in streams:
                stream.close()
            raise
        finally:
            for fd in write_ends:
                os.close(fd)
        if on_start is not None:
            on_start(process.pid)
        fired: TimeoutKind | None = None
        try:
            fired = await _watch(process, tee, budgets, started)
            if fired is not None:
                await _stop(process, grace_s)
        finally:
            # Leftover children (and a leader still alive on cancellation) die with the session.
            kill_group(process.pid, signal.SIGKILL)
            await _drain(streams)
    return ProcessOutcome(
        exit_code=process.returncode,
        timeout=fired,
        duration_s=time.monotonic() - started,
        pgid=process.pid,
        saw_output=tee.last_output is not None,
    )


def _pipes(tee: _Tee) -> tuple[list[_Stream], tuple[int, int]]:
    loop = asyncio.get_running_loop()
    streams: list[_Stream] = []
    writes: list[int] = []
    for name in ("stdout", "stderr"):
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        stream = _Stream(name, read_end, tee)
        loop.add_reader(read_end, stream.on_readable)
        streams.append(stream)
        writes.append(write_end)
    return streams, (writes[0], writes[1])


async def _watch(
    process: asyncio.subprocess.Process, tee: _Tee, budgets: Budgets, started: float
) -> TimeoutKind | None:
    """Wait for the leader to exit; return the budget that fired first, if any."""
    exited = asyncio.ensure_future(process.wait())
    # The first output moves the watch from the session-start deadline to the idle one.
    spoke = asyncio.ensure_future(tee.first_output.wait())
    try:
        while True:
            kind, deadline = _next_deadline(tee, budgets, started)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return kind
            waits = {exited} if spoke.done() else {exited, spoke}
            await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                return None
    finally:
        for task in (exited, spoke):
            if not task.done():
                task.cancel()


def _next_deadline(tee: _Tee, budgets: Budgets, started: float) -> tuple[TimeoutKind, float]:
    deadlines: list[tuple[float, TimeoutKind]] = [(started + budgets.total_s, "total")]
    if tee.last_output is None and budgets.session_start_s is not None:
        deadlines.append((started + budgets.session_start_s, "session_start"))
    elif tee.last_output is not None and budgets.idle_s is not None:
        deadlines.append((tee.last_output + budgets.idle_s, "idle"))
    at, kind = min(deadlines)
    return kind, at


async def _stop(process: asyncio.subprocess.Process, grace_s: float) -> None:
    kill_group(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), grace_s)
    except TimeoutError:
        kill_group(process.pid, signal.SIGKILL)
        await process.wait()


async def _drain(streams: list[_Stream]) -> None:
    """Read what is left; a pipe still held open by an escaped process is cut off."""
    waits = [asyncio.ensure_future(stream.done.wait()) for stream in streams]
    await asyncio.wait(waits, timeout=_DRAIN_S)
    for wait in waits:
        wait.cancel()
    for stream in streams:
        stream.close()
