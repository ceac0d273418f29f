"""The host-open session's keeper: a child subreaper that outlives every detached descendant.

`host-open` gives the agent a process group, but `setsid` (and a double fork) leaves the
group, and a process that also clears its env loses the session marker the survivor scan
looks for. So the agent's command runs under this small program, started as
`python -I _reaper.py REPORT WAIT_S -- ARGV...`, which marks itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`): every orphaned descendant, whatever its session, group
or env, is re-parented to it instead of to init. When the agent's command exits (on its
own, or killed WAIT_S after the runner's SIGTERM) it kills every process left under it,
reaps them, writes what it
killed to REPORT (JSON: `{"killed": [{"pid": ..., "name": ...}]}`) and exits as the agent
did. A descendant can still leave by asking another process to start it (an ssh to
localhost, a systemd-run, a daemon it talks to): that is outside what host-open contains.

It runs with the agent's env, so it imports only the standard library (and `-I` keeps the
agent's `PYTHON*` variables from steering it).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

__all__ = ["PR_SET_CHILD_SUBREAPER", "main", "reaper_argv"]

PR_SET_CHILD_SUBREAPER = 36
_REAP_WINDOW_S = 2.0
_POLL_S = 0.005


def reaper_argv(report: Path, argv: list[str], grace_s: float) -> list[str]:
    """The command that runs `argv` under the keeper, reporting to `report`.

    `grace_s` is the runner's SIGTERM → SIGKILL grace: the keeper gives the agent half of
    it to exit on its own, so that its reaping is done before the runner's SIGKILL.
    """
    keeper = str(Path(__file__).resolve())
    return [sys.executable, "-I", keeper, str(report), f"{grace_s / 2:.3f}", "--", *argv]


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _children(parent: int) -> dict[int, str]:
    """Live (non-zombie) children of `parent`, pid → command name, from /proc."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        name, _, rest = stat.rpartition(")")
        fields = rest.split()
        if len(fields) > 1 and fields[0] != "Z" and int(fields[1]) == parent:
            found[int(entry.name)] = name.partition("(")[2]
    return found


def _reap_all() -> list[dict[str, object]]:
    """Kill every process under us until none is left (or the window closes); return them."""
    killed: dict[int, str] = {}
    deadline = time.monotonic() + _REAP_WINDOW_S
    me = os.getpid()
    while time.monotonic() < deadline:
        for pid, name in _children(me).items():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.setdefault(pid, name)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            break  # nothing under us any more, alive or zombie
        time.sleep(_POLL_S)
    return [{"pid": pid, "name": name} for pid, name in sorted(killed.items())]


def _exit_like(code: int) -> None:
    """Leave with `code` as a returncode reads: an exit code, or minus the ending signal."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def main(args: list[str]) -> None:
    """`REPORT WAIT_S -- ARGV...`: run ARGV, then kill and report whatever it left behind."""
    if len(args) < 4 or args[2] != "--":
        sys.exit("usage: _reaper.py REPORT WAIT_S -- ARGV...")
    report, wait_s, argv = Path(args[0]), float(args[1]), args[3:]
    _become_subreaper()
    agent: list[int] = []
    stopped: list[int] = []

    def stop(signum: int, frame: object) -> None:
        # The runner is ending the session; the agent got the same SIGTERM (one group) and
        # has `wait_s` to exit cleanly before it is killed. The rest is reaped below.
        stopped.append(signum)
        signal.setitimer(signal.ITIMER_REAL, max(wait_s, 0.01))

    def kill_agent(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, IndexError):
            os.kill(agent[0], signal.SIGKILL)

    # Before the fork, so a SIGTERM at once still finds the handler (exec resets them).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, kill_agent)
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            print(f"{argv[0]}: {error.strerror}", file=sys.stderr)
            os._exit(127)
    agent.append(pid)
    if stopped:  # the SIGTERM came before the agent existed: its wait starts now
        signal.setitimer(signal.ITIMER_REAL, max(wait_s, 0.01))
    _, status = os.waitpid(pid, 0)
    killed = _reap_all()
    report.write_text(json.dumps({"killed": killed}))
    _exit_like(-signal.SIGTERM if stopped else os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
