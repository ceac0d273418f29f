"""Child processes of a stack: one process group each, a log file each, health-gated."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from sreforge_prom import shared_tls_context

from sreforge_deployer._errors import BinaryMissingError, ComponentStartError
from sreforge_deployer._memory import MemoryLimit
from sreforge_deployer._ports import ensure_free

__all__ = [
    "Component",
    "LaunchSpec",
    "group_members",
    "groups_members",
    "log_tail",
    "resolve_binary",
    "run_captured",
    "run_once",
    "stop_group",
    "stop_groups",
]

# Health gates and stop waits poll this often; each poll is one local request or one
# scan of the pid table, and every poll interval is wall time a run waits for nothing.
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one long-running component and how to know it is up."""

    name: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    log_path: Path
    port: int | None = None
    health_url: str | None = None
    startup_timeout_seconds: float = 30.0
    folders: tuple[Path, ...] = ()
    """Folders made (mode 0700) before each start (a confined launch's relay sockets)."""
    memory_limit: MemoryLimit | None = None
    """The kernel-enforced memory limit of the whole process group, if any."""


@dataclass
class Component:
    """A running component: its spec, its `Popen` and its process group id.

    An adopted component (started by a deployer that has since died) has no `Popen`,
    only its recorded group `adopted_pgid`: it can be stopped, not waited on.
    """

    spec: LaunchSpec
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    adopted_pgid: int | None = None

    @property
    def pgid(self) -> int | None:
        """The component's process group id (== its leader's pid), once started."""
        return self.process.pid if self.process else self.adopted_pgid

    def start(self) -> None:
        """Spawn the component in its own session/process group, logging to its file."""
        spec = self.spec
        argv = [resolve_binary(spec.name, spec.argv[0], spec.env), *spec.argv[1:]]
        if spec.port is not None:
            ensure_free(spec.name, spec.port)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        for folder in spec.folders:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        enter = None
        if spec.memory_limit is not None:
            procs = spec.memory_limit.create()
            enter = functools.partial(MemoryLimit.enter, procs)
        with spec.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=spec.cwd,
                env=spec.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=enter,  # in the cgroup before exec: nothing it forks is outside
            )

    def wait_healthy(self) -> None:
        """Block until the health URL answers 2xx from *this* process, or raise."""
        spec = self.spec
        deadline = time.monotonic() + spec.startup_timeout_seconds
        with httpx.Client(timeout=1.0, trust_env=False, verify=shared_tls_context()) as client:
            while True:
                self._raise_if_exited()
                if spec.health_url is None or _answers(client, spec.health_url):
                    break
                if time.monotonic() > deadline:
                    self._fail(
                        f"not healthy within {spec.startup_timeout_seconds:g}s "
                        f"(GET {spec.health_url})"
                    )
                time.sleep(_POLL_SECONDS)
        self._check_port_owner()

    def alive(self) -> bool:
        """Whether the component's leader process is still running."""
        if self.process is None:
            return self.adopted_pgid is not None and bool(group_members(self.adopted_pgid))
        return self.process.poll() is None

    def stop(self, timeout_seconds: float) -> list[int]:
        """Stop the whole group (TERM, then KILL); return pids that survived both."""
        if self.process is None:
            pgid = self.adopted_pgid
            return [] if pgid is None else stop_group(pgid, timeout_seconds)
        survivors = stop_group(self.process.pid, timeout_seconds)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout_seconds)
        return survivors

    def _raise_if_exited(self) -> None:
        assert self.process is not None, "start() before wait_healthy()"
        code = self.process.poll()
        if code is not None:
            self._fail(f"process exited with code {code} during startup")

    def _check_port_owner(self) -> None:
        port = self.spec.port
        if port is None or self.pgid is None:
            return
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
                continue
            if conn.pid is not None and _pgid_of(conn.pid) not in (self.pgid, None):
                self._fail(f"port {port} answers, but is held by pid {conn.pid}, not by us")

    def _fail(self, reason: str) -> None:
        if self.process is not None:
            stop_group(self.process.pid, 3.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=3.0)
        raise ComponentStartError(
            self.spec.name,
            reason,
            log_path=self.spec.log_path,
            log_tail=log_tail(self.spec.log_path),
        )


def _answers(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url).is_success
    except httpx.HTTPError:
        return False


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def resolve_binary(component: str, binary: str, env: dict[str, str]) -> str:
    """The absolute path of `binary` as `env`'s PATH finds it, or `BinaryMissingError`."""
    if os.sep in binary:
        if os.access(binary, os.X_OK):
            return binary
        raise BinaryMissingError(component, binary)
    found = shutil.which(binary, path=env.get("PATH", os.defpath))
    if found is None:
        raise BinaryMissingError(component, binary)
    return found


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in process group `pgid`."""
    return groups_members([pgid])[pgid]


def groups_members(pgids: Iterable[int]) -> dict[int, list[psutil.Process]]:
    """Live (non-zombie) processes of each group in `pgids`, from one scan of the pids.

    Only the group id is asked of every pid (one syscall each); a process's status
    is read only for members, which keeps a scan cheap on a busy machine.
    """
    members: dict[int, list[psutil.Process]] = {pgid: [] for pgid in pgids}
    for pid in psutil.pids():
        pgid = _pgid_of(pid)
        if pgid not in members:
            continue
        proc = _live_process(pid)
        if proc is not None:
            members[pgid].append(proc)
    return members


def _live_process(pid: int) -> psutil.Process | None:
    """The process `pid`, unless it is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc
    except psutil.NoSuchProcess:
        return None


def stop_group(pgid: int, timeout_seconds: float) -> list[int]:
    """SIGTERM the group, wait, SIGKILL what is left; return pids still alive after that."""
    return stop_groups([pgid], timeout_seconds)


def stop_groups(
    pgids: list[int], timeout_seconds: float, *, term_grace_seconds: float | None = None
) -> list[int]:
    """Stop several groups at once (TERM all, wait, KILL all left); return survivors' pids.

    The wait after TERM is `term_grace_seconds` when given (a teardown owes no drain),
    else `timeout_seconds`; the wait after KILL is always `timeout_seconds`.
    """
    remaining = list(pgids)
    term_wait = timeout_seconds if term_grace_seconds is None else term_grace_seconds
    for sig, wait in ((signal.SIGTERM, term_wait), (signal.SIGKILL, timeout_seconds)):
        for pgid in remaining:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while remaining and time.monotonic() < deadline:
            left = groups_members(remaining)
            remaining = [pgid for pgid in remaining if left[pgid]]
            if remaining:
                time.sleep(_POLL_SECONDS)
        if not remaining:
            return []
    return [proc.pid for members in groups_members(remaining).values() for proc in members]


def run_captured(
    argv: Sequence[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> tuple[int | None, str]:
    """Run `argv` in a session of its own, its output (stdout and stderr) captured: its
    exit code, or None when it ran past `timeout_s` (then its whole group is killed: what
    it spawned must not outlive the caller)."""
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output
    return process.returncode, output


def run_once(spec: LaunchSpec) -> None:
    """Run a one-shot command (e.g. seeding) to completion in its own group, or raise."""
    argv = [resolve_binary(spec.name, spec.argv[0], spec.env), *spec.argv[1:]]
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with spec.log_path.open("ab") as log:
        process = subprocess.Popen(
            argv,
            cwd=spec.cwd,
            env=spec.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=spec.startup_timeout_seconds)
        except subprocess.TimeoutExpired:
            stop_group(process.pid, 3.0)
            process.wait()
            code = None
    if code == 0:
        return
    reason = (
        f"did not finish within {spec.startup_timeout_seconds:g}s"
        if code is None
        else f"exited with code {code}"
    )
    raise ComponentStartError(
        spec.name, reason, log_path=spec.log_path, log_tail=log_tail(spec.log_path)
    )


def log_tail(path: Path, lines: int = 20, max_bytes: int = 8192) -> str:
    """The last `lines` lines of a log file (empty if it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
