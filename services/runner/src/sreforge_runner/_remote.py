"""The `remote` sandbox: the agent runs on another machine, every command over ssh.

The transport (`_ssh`) pins the profile's host key and uses only its identity.
`create` makes the session's `remote_dir` with `mktemp -d` under the profile's
`base_dir`:

    <remote_dir>/workspace  home  bin  agent.pgid

Around each `run` the host's workspace, HOME and bin are pushed (rsync over the
same ssh, `--delete`) and the workspace and HOME pulled back, so between runs the
host copy is the truth: the diff, the sentinel and native session files are read
there. The agent's env (credentials included) travels in a 0600 file the remote
launcher reads and deletes before the agent starts, never on a command line. The
agent runs under `setsid` (its own session and group; the pgid is written to
`agent.pgid`), stdin closed; its output streams back over the channel through
`run_in_group` (budgets, stamped transcript). After every run, whatever ended it,
the remote group is killed (TERM and a grace period when a budget fired, then
`kill -s KILL -- -<pgid>`), and processes that left the group but carry the
session marker are swept. `destroy` does it once more and removes `remote_dir`
(only ever a `session.*` folder under `base_dir`). The remote needs a POSIX login
shell, `setsid` (util-linux), GNU or busybox `grep` and `rsync`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sreforge_contracts import RemoteSpec, SandboxKind

from sreforge_runner._agent_sandbox import (
    SESSION_MARKER,
    SessionLayout,
    agent_env,
    write_git_identity,
)
from sreforge_runner._errors import SandboxError
from sreforge_runner._process import Budgets, ProcessOutcome, run_in_group
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._ssh import SshTransport, client_env
from sreforge_runner._submit import exclude_sentinel_dir, install_submit

__all__ = ["RemoteSandbox"]

_REMOTE_FILE = "remote.json"
_KNOWN_HOSTS = "known_hosts"
_TICK_S = 0.1
_ENV_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass
class RemoteSandbox(SessionLayout):
    """The agent's sandbox on an ssh host (`remote`), driven from the runner's host."""

    workspace: Path
    root: Path
    settings: RunnerSettings
    spec: RemoteSpec
    kind: SandboxKind = "remote"
    confinement: SandboxKind | None = field(default=None, init=False)
    """`remote` once `create` made the session's remote_dir (None until then)."""
    downgrade: str | None = field(default=None, init=False)
    reaped: list[str] | None = field(default=None, init=False)
    """Not tracked remotely: the remote session's marked processes are killed by `_stop`."""
    remote_dir: PurePosixPath | None = field(default=None, init=False)
    """The session's folder on the remote host."""
    agent_pgid: int | None = field(default=None, init=False)
    """The remote process group the last stop killed."""
    _scan_error: str | None = field(default=None, init=False, repr=False)
    _ssh: SshTransport = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ssh = SshTransport(self.spec, self.root / _KNOWN_HOSTS)

    @property
    def marker(self) -> str:
        """This session's value of `AGENT_SESSION` (the remote_dir)."""
        return str(self._created())

    @property
    def confined(self) -> bool:
        """True once the agent's paths are the remote's (see `inside`)."""
        return self.confinement == "remote"

    @property
    def target(self) -> str:
        """`user@host:port`, for messages."""
        return self._ssh.target

    def inside(self, host_path: Path) -> Path:
        """Where a host path under the workspace, HOME or bin is on the remote."""
        remote = self._created()
        for host, name in self._synced():
            if host_path == host or host_path.is_relative_to(host):
                return Path(remote / name / host_path.relative_to(host))
        raise SandboxError(f"{host_path} is not synced to the remote sandbox")

    def allow_endpoint(self, url: str) -> None:
        """Refuse: a loopback endpoint of the runner is not reachable from the remote."""
        raise SandboxError(f"remote {self.target}: the runner's endpoint {url} is not reachable")

    def create(self) -> None:
        """Pin the host key, make remote_dir, HOME and bin, install `submit`."""
        if not (self.workspace / ".git").exists():
            raise SandboxError(f"workspace {self.workspace} is not a git checkout")
        self.root.mkdir(parents=True, exist_ok=True)
        self._ssh.identity()
        self._ssh.pin_host_key()
        made = self._ssh.control(("create", self.spec.base_dir)).strip().splitlines()
        remote_dir = PurePosixPath(made[-1]) if made else PurePosixPath("/")
        if remote_dir.parent != PurePosixPath(self.spec.base_dir):
            raise SandboxError(f"remote {self.target}: mktemp answered {remote_dir}")
        self.remote_dir = remote_dir
        (self.root / _REMOTE_FILE).write_text(json.dumps({"remote_dir": str(remote_dir)}))
        self.confinement = "remote"
        try:
            self.session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            install_submit(self.bin_dir, self.inside(self.workspace))
            exclude_sentinel_dir(self.workspace)
            write_git_identity(self.settings, self.home, self.workspace)
        except OSError as error:
            raise SandboxError(f"sandbox in {self.root}: {error}") from error

    def network_metadata(self) -> dict[str, object]:
        """What the agent's network was: the remote host's own (not restricted here)."""
        return {"egress": "remote-host"} if self.confined else {}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The agent's whole environment: the allowlist, PATH with `submit`, fresh HOME."""
        return agent_env(
            self.settings,
            bin_dir=self.inside(self.bin_dir),
            home=self.inside(self.home),
            workspace=self.inside(self.workspace),
            marker=self.marker,
            extra=extra,
        )

    async def run(
        self,
        argv: Sequence[str],
        budget_s: float | Budgets,
        extra_env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> ProcessOutcome:
        """Push, run the command remotely in its own group within its budgets (stdin
        closed, output streamed back), kill the remote group, pull."""
        remote = self._created()
        await asyncio.to_thread(self._push)
        env_file = "".join(f"{k}={shlex.quote(v)}\n" for k, v in self._checked(extra_env).items())
        await asyncio.to_thread(self._ssh.control, ("env", str(remote)), stdin=env_file)
        try:
            outcome = await run_in_group(
                self._ssh.launch(remote, argv),
                cwd=self.root,
                env=client_env(),
                budget_s=budget_s,
                log_path=log_path or self.log_path,
                transcript_path=self.transcript_path,
                grace_s=self.settings.kill_grace_seconds,
            )
        except BaseException:
            await asyncio.to_thread(self._stop, True)
            raise
        await asyncio.to_thread(self._stop, outcome.timed_out)
        await asyncio.to_thread(self._pull)
        return outcome

    def survivors(self) -> list[int]:
        """Pids of live remote processes carrying this session's marker (should be none)."""
        return self.settled_survivors(0.0)

    def settled_survivors(self, within_s: float = 3.0) -> list[int]:
        """Remote survivors still alive after `within_s` to unwind; [] when there is no
        remote_dir (an unreachable remote is remembered and reported by `destroy`)."""
        if self.remote_dir is None:
            return []
        ticks = str(int(within_s / _TICK_S))
        try:
            found = self._ssh.control(("scan", f"{SESSION_MARKER}={self.marker}", ticks))
        except SandboxError as error:
            self._scan_error = str(error)
            return []
        return [int(pid) for pid in found.split() if pid.isdigit()]

    def kill_leftovers(self) -> None:
        """After an interrupted runner: kill the recorded session's remote processes, pull
        its workspace back, then remove its remote_dir (kept when the pull failed)."""
        try:
            recorded = json.loads((self.root / _REMOTE_FILE).read_text())
            self.remote_dir = PurePosixPath(str(recorded["remote_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            return
        with contextlib.suppress(SandboxError):
            self._ssh.pin_host_key()
            self._stop(gentle=False)
            self._pull()
            self._remove()
        self._ssh.close()

    def destroy(self) -> None:
        """Kill the remote group and any marked survivor, remove remote_dir, HOME and bin
        (the logs stay); `SandboxError` when the remote could not be cleaned or checked."""
        problems: list[str] = []
        if self.remote_dir is not None:
            try:
                self._stop(gentle=False)
                self._remove()
            except SandboxError as error:
                problems.append(str(error))
        for folder in (self.home, self.bin_dir):
            try:
                shutil.rmtree(folder)
            except FileNotFoundError:
                continue
            except OSError as error:
                problems.append(f"cannot remove {folder}: {error}")
        self._ssh.close()
        if self._scan_error:
            problems.append(f"survivors not checked: {self._scan_error}")
        if problems:
            raise SandboxError("; ".join(problems))

    def _synced(self) -> tuple[tuple[Path, str], ...]:
        """Host folders and their names in remote_dir: workspace and HOME go both ways."""
        return ((self.workspace, "workspace"), (self.home, "home"), (self.bin_dir, "bin"))

    def _created(self) -> PurePosixPath:
        if self.remote_dir is None:
            raise SandboxError(f"remote {self.target}: the sandbox was not created")
        return self.remote_dir

    def _checked(self, extra_env: dict[str, str] | None) -> dict[str, str]:
        env = self.env(extra_env)
        for name in env:
            if not name or name[0].isdigit() or not set(name) <= _ENV_NAME:
                raise SandboxError(f"agent env: {name!r} is not an env var name")
        return env

    def _stop(self, gentle: bool) -> None:
        """Kill the remote group (TERM and grace first when `gentle`), sweep marked ones."""
        ticks = str(int(self.settings.kill_grace_seconds / _TICK_S) if gentle else 0)
        marker = f"{SESSION_MARKER}={self.marker}"
        said = self._ssh.control(("stop", str(self._created()), marker, ticks)).split()
        if said[:1] == ["pgid"] and said[1:2] and said[1].isdigit():
            self.agent_pgid = int(said[1])

    def _remove(self) -> None:
        remote = self._created()
        if remote.parent != PurePosixPath(self.spec.base_dir) or not remote.name.startswith(
            "session."
        ):
            raise SandboxError(f"refusing to remove {remote}: not under {self.spec.base_dir}")
        self._ssh.control(("remove", str(remote), self.spec.base_dir))
        with contextlib.suppress(FileNotFoundError):
            (self.root / _REMOTE_FILE).unlink()

    def _push(self) -> None:
        remote = self._created()
        for host, name in self._synced():
            self._ssh.rsync(f"{host}/", f"{self.spec.host}:{remote / name}/")

    def _pull(self) -> None:
        remote = self._created()
        for host, name in self._synced()[:2]:
            self._ssh.rsync(f"{self.spec.host}:{remote / name}/", f"{host}/")
