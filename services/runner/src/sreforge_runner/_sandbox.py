"""The agent's sandbox: `host-open`, or `host-sandboxed` (bubblewrap, see `_bwrap`).

Both give the agent its own process group, a scrubbed env, a fresh HOME and the
workspace as cwd. Its directory (`<run_dir>/agent/`) holds the fresh HOME, the bin
dir with `submit`, the agent's output log and its timestamped transcript. HOME and
bin are removed on destroy; the log and transcript stay for the record.
`host-open` is not a security boundary (the host's network included);
`host-sandboxed` is, within the limits documented in `_bwrap`, and its network is
only the allowlisted loopback endpoints (`_egress`; their relays' folder goes on
destroy too). `confinement` is the kind actually achieved: when bwrap
cannot create its namespaces the sandbox falls back to `host-open` only if the
profile allows it, and says so.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from sreforge_contracts import SandboxKind

from sreforge_runner._agent_sandbox import (
    SESSION_MARKER,
    SessionLayout,
    agent_env,
    write_git_identity,
)
from sreforge_runner._bwrap import (
    SANDBOX_BIN,
    SANDBOX_HOME,
    SANDBOX_WORKSPACE,
    bwrap_prefix,
    outside_the_view,
    probe_bwrap,
    shown_at,
)
from sreforge_runner._egress import HostEgress, parse_endpoint
from sreforge_runner._errors import SandboxError
from sreforge_runner._process import Budgets, ProcessOutcome, kill_group, run_in_group
from sreforge_runner._reaper import reaper_argv
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._submit import exclude_sentinel_dir, install_submit

__all__ = ["CONFINEMENT", "HostSandbox"]

CONFINEMENT: SandboxKind = "host-open"
"""The default confinement (the built-in reins run there)."""
_PROCESS_FILE = "process.json"
_REAPED_FILE = "reaped.json"


@dataclass
class HostSandbox(SessionLayout):
    """The agent's host-side sandbox for one run."""

    workspace: Path
    root: Path
    settings: RunnerSettings
    kind: SandboxKind = "host-open"
    fallback: SandboxKind | None = None
    install_paths: tuple[str, ...] = ()
    """Host folders bound read-only inside `host-sandboxed` (the agent's install)."""
    mount_at: dict[str, str] = field(default_factory=dict)
    """Install paths shown elsewhere inside (host folder → inside folder)."""
    endpoints: tuple[str, ...] = ()
    """Loopback `http(s)://127.0.0.1:<port>` URLs the confined agent may reach (see
    `_egress`); under `host-sandboxed` nothing else on the network exists for it."""
    confinement: SandboxKind | None = field(default=None, init=False)
    """The confinement achieved by `create` (None until then)."""
    downgrade: str | None = field(default=None, init=False)
    """Why `host-sandboxed` fell back to `host-open`, when it did."""
    egress: HostEgress = field(init=False, repr=False)
    """The host side of the egress allowlist (used only when confined)."""
    reaped: list[str] | None = field(default=None, init=False)
    """Names of the detached processes `host-open`'s keeper killed when a command of the
    agent ended (see `_reaper`); None when no command ran under it."""

    def __post_init__(self) -> None:
        self.egress = HostEgress(self.root / "net")

    @property
    def marker(self) -> str:
        """This session's value of `AGENT_SESSION`."""
        return str(self.root.resolve())

    @property
    def confined(self) -> bool:
        """True when the agent runs under bubblewrap."""
        return self.confinement == "host-sandboxed"

    def allow_endpoint(self, url: str) -> None:
        """Let the confined agent reach `url`'s loopback host:port (call before `run`)."""
        parse_endpoint(url)
        if url not in self.endpoints:
            self.endpoints = (*self.endpoints, url)

    def inside(self, host_path: Path) -> Path:
        """How a host path under the workspace or HOME looks to the agent."""
        if not self.confined:
            return host_path
        for host, mounted in ((self.workspace, SANDBOX_WORKSPACE), (self.home, SANDBOX_HOME)):
            if host_path == host or host_path.is_relative_to(host):
                return mounted / host_path.relative_to(host)
        raise SandboxError(f"{host_path} is not visible inside the sandbox")

    def create(self) -> None:
        """Make HOME (neutral git identity) and bin, install `submit`, ignore `.oncall/`."""
        if not (self.workspace / ".git").exists():
            raise SandboxError(f"workspace {self.workspace} is not a git checkout")
        self.confinement = self._confine()
        try:
            self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.session_dir.mkdir(exist_ok=True)
            install_submit(self.bin_dir, self.inside(self.workspace))
            exclude_sentinel_dir(self.workspace)
            write_git_identity(self.settings, self.home, self.workspace)
        except OSError as error:
            raise SandboxError(f"sandbox in {self.root}: {error}") from error

    def _confine(self) -> SandboxKind:
        if self.kind == "host-open":
            return "host-open"
        if self.kind != "host-sandboxed":
            raise SandboxError(f"sandbox {self.kind}: not available on this runner yet")
        for url in self.endpoints:  # one that cannot be relayed fails here, not mid-run
            parse_endpoint(url)
        for folder in (self.home, self.bin_dir):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.egress.install()
        # The probe goes through the relay: it proves the netns and the interpreter too.
        why = probe_bwrap([*self._prefix(), *self.egress.command([])])
        if why is None:
            return "host-sandboxed"
        if self.fallback != "host-open":
            raise SandboxError(f"host-sandboxed: bubblewrap failed ({why}); no fallback allowed")
        self.downgrade = why
        return "host-open"

    def _prefix(self) -> list[str]:
        return bwrap_prefix(
            self.settings.bwrap_path,
            self.workspace,
            self.home,
            self.bin_dir,
            self.install_paths,
            network=self.egress.folder,
            mount_at=self.mount_at,
        )

    def network_metadata(self) -> dict[str, object]:
        """What the agent's network was: the allowlist's ports when confined, else the host's."""
        if self.confinement == "host-sandboxed":
            ports = sorted({parse_endpoint(url).port for url in self.endpoints})
            return {"egress": "allowlist", "egress_ports": ports}
        if self.confinement == "host-open":
            return {"egress": "host"}
        return {}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The agent's whole environment: the allowlist, PATH with `submit`, fresh HOME."""
        return agent_env(
            self.settings,
            bin_dir=SANDBOX_BIN if self.confined else self.bin_dir,
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
        *,
        transcript: bool = True,
    ) -> ProcessOutcome:
        """Run the agent's command in the workspace within its budgets (stdin closed);
        raw output goes to `log_path` (default: the output log) and, unless `transcript`
        is off (a harness probe), stamped to the transcript."""
        command = list(argv)
        if self.confined:
            command[0] = self._executable(command[0])
            self.egress.open(parse_endpoint(url) for url in self.endpoints)
            command = [*self._prefix(), *self.egress.command(command)]
        else:  # bwrap's pid namespace contains the confined agent; host-open needs a keeper
            (self.root / _REAPED_FILE).unlink(missing_ok=True)
            report = self.root / _REAPED_FILE
            command = reaper_argv(report, command, self.settings.kill_grace_seconds)
        try:
            return await run_in_group(
                command,
                cwd=self.workspace,
                env=self.env(extra_env),
                budget_s=budget_s,
                log_path=log_path or self.log_path,
                transcript_path=self.transcript_path if transcript else None,
                grace_s=self.settings.kill_grace_seconds,
                on_start=self._remember,
            )
        finally:
            if not self.confined:
                self._read_reaped()

    def _executable(self, executable: str) -> str:
        """The executable as the confined agent starts it; an installed one that could not
        start there fails here, naming the missing link or interpreter."""
        installed = any(Path(executable).is_relative_to(path) for path in self.install_paths)
        why = outside_the_view(executable, self.install_paths) if installed else None
        if why is not None:
            raise SandboxError(f"agent executable {executable}: {why}")
        return shown_at(executable, self.mount_at)

    def _read_reaped(self) -> None:
        names = list(self.reaped or [])
        try:
            report = json.loads((self.root / _REAPED_FILE).read_text())
            names.extend(str(entry["name"]) for entry in report["killed"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the keeper was killed before its report: the survivor scan still runs
        self.reaped = names

    def settled_survivors(self, within_s: float = 3.0) -> list[int]:
        """Survivors still alive after giving a killed namespace `within_s` to unwind."""
        deadline = time.monotonic() + within_s
        found = self.survivors()
        while found and time.monotonic() < deadline:
            time.sleep(0.05)
            found = self.survivors()
        return found

    def survivors(self) -> list[int]:
        """Pids of live processes carrying this session's marker (should be none)."""
        found = []
        for process in psutil.process_iter(["pid"]):
            try:
                ours = process.environ().get(SESSION_MARKER) == self.marker
                if ours and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process.pid)
            except (psutil.Error, OSError):
                continue
        return found

    def kill_leftovers(self) -> None:
        """Kill the agent's group recorded by an earlier (interrupted) runner, if still ours."""
        try:
            recorded = json.loads((self.root / _PROCESS_FILE).read_text())
            leader = psutil.Process(int(recorded["pgid"]))
            if abs(leader.create_time() - float(recorded["started_at"])) < 1e-3:
                kill_group(int(recorded["pgid"]))
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            pass
        for pid in self.survivors():  # escaped the group (setsid) but carries our marker
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()

    def destroy(self) -> None:
        """Kill any survivor of the session, stop the egress relays, remove HOME, bin and
        the relays' folder (the logs stay)."""
        for pid in self.survivors():
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        self.egress.close()
        for folder in (self.home, self.bin_dir, self.egress.folder):
            try:
                shutil.rmtree(folder, ignore_errors=False)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise SandboxError(f"cannot remove {folder}: {error}") from error

    def _remember(self, pgid: int) -> None:
        try:
            started = psutil.Process(pgid).create_time()
        except psutil.Error:
            return
        (self.root / _PROCESS_FILE).write_text(json.dumps({"pgid": pgid, "started_at": started}))
