"""No stack outlives its owner: the warden that watches an owner, and reaping orphans.

A stack whose record says `dies_with_owner` has nobody to adopt it (its owner is a CLI
with its own temporary bus), so it must not run on once that owner is gone. Each such
owner starts one warden per runs root (`watch_owner`): a small process in a session of
its own (a `timeout` or a terminal signalling the owner's group does not reach it)
that blocks on a pipe only the owner holds open. The pipe reads EOF when the owner's
process ends, by SIGKILL too, whichever of its threads started the stack; the warden
then tears down each `dies_with_owner` stack of that owner (pid and start time) under
the root, its process groups, cgroups, run dir and port leases, and says so on the
stderr it shares with the owner. At a clean exit the owner closes the pipe itself and
waits for its warden, so a finished command leaves no warden behind. `reap_orphans` is
the same teardown for any such stack whose owner is gone, for an engine start to run when
a warden died with its owner.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sreforge_deployer._errors import DeployerError
from sreforge_deployer._run import own_start_time
from sreforge_deployer.local._state import StackRecord, list_records, owner_alive
from sreforge_deployer.local._teardown import teardown_record

__all__ = ["Reaped", "orphaned", "reap_after", "reap_orphans", "watch_owner"]

# The warden blocks before it imports anything of the harness: an idle warden is a bare
# interpreter, not a second copy of the deployer.
_WATCH = """\
import json, os, pathlib, signal, sys
for quiet in (signal.SIGINT, signal.SIGHUP):
    signal.signal(quiet, signal.SIG_IGN)
while os.read(0, 4096):
    pass
root, owner = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def left(state):
    try:
        return json.loads(state.read_text()).get("owner_pid") == owner
    except (OSError, ValueError):
        return False
if any(left(state) for state in root.glob("*/stack.json")):
    from sreforge_deployer.local._warden import reap_after
    sys.exit(reap_after(sys.argv[1:]))
"""

_RELEASE_WAIT_S = 30.0
_LOCK = threading.Lock()
_WARDENS: dict[Path, tuple[int, subprocess.Popen[bytes]]] = {}
"""Runs root → the write end of the pipe the warden watches (never closed: the
process's end closes it) and the warden."""


def watch_owner(runs_root: Path) -> None:
    """Start this process's warden over `runs_root`, once per process and root."""
    root = runs_root.resolve()
    with _LOCK:
        if root in _WARDENS:
            return
        # os.pipe's ends are not inherited across exec: only this process holds `write`.
        read, write = os.pipe()
        try:
            warden = subprocess.Popen(
                [sys.executable, "-c", _WATCH, str(root), str(os.getpid()), repr(own_start_time())],
                stdin=read,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        if not _WARDENS:
            atexit.register(_release_wardens)
        _WARDENS[root] = (write, warden)


def _release_wardens() -> None:
    """At a clean exit, end each warden now rather than after this process: it finds
    nothing of ours left (or tears down what is) before the process is gone, so nothing
    of a finished command outlives it."""
    with _LOCK:
        wardens = list(_WARDENS.values())
        _WARDENS.clear()
    for write, _ in wardens:
        os.close(write)
    for _, warden in wardens:
        with contextlib.suppress(subprocess.TimeoutExpired):
            warden.wait(timeout=_RELEASE_WAIT_S)


def orphaned(record: StackRecord, owner: tuple[int, float] | None = None) -> bool:
    """Whether `record`'s stack is to be reaped: it dies with its owner, that owner is
    gone and, when `owner` (pid, start time) is given, it is that owner's."""
    if not record.dies_with_owner:
        return False
    if owner is not None:
        pid, started = owner
        same_start = record.owner_started_at is not None and (
            abs(record.owner_started_at - started) < 1.0
        )
        if record.owner_pid != pid or not same_start:
            return False
    return not owner_alive(record)


@dataclass(frozen=True)
class Reaped:
    """A stack torn down because its owner was gone; `left` is what survived, if any."""

    record: StackRecord
    left: str | None = None

    def __str__(self) -> str:
        record = self.record
        gone = f"stack {record.run_id} ({record.scenario_id}): its owner, pid {record.owner_pid},"
        outcome = f"tearing it down left: {self.left}" if self.left else "torn down, nothing left"
        return f"{gone} is gone; {outcome}"


def reap_orphans(runs_root: Path, owner: tuple[int, float] | None = None) -> list[Reaped]:
    """Tear down each stack under `runs_root` that `orphaned` names."""
    reaped = []
    for record in list_records(runs_root):
        if not orphaned(record, owner):
            continue
        try:
            teardown_record(record)
        except DeployerError as error:
            reaped.append(Reaped(record, str(error)))
            continue
        reaped.append(Reaped(record))
    return reaped


def reap_after(argv: list[str]) -> int:
    """The warden's work once its owner has ended (`ROOT PID START_TIME`): 0 when every
    stack of that owner is gone, 1 when something was left."""
    root, pid, started = Path(argv[0]), int(argv[1]), float(argv[2])
    reaped = reap_orphans(root, (pid, started))
    for one in reaped:
        try:
            print(f"sreforge: {one}", file=sys.stderr, flush=True)
        except OSError:  # whoever read the owner's stderr is gone too
            break
    return 1 if any(one.left for one in reaped) else 0
