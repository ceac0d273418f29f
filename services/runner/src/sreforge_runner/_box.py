"""The `in-box` sandbox: the agent's commands in a container on the run's agent network.

Only the compose topology offers it: its stack reports the Docker network an agent
joins (`<project>_agent`), where the gateway answers to the page's names
(`http://prometheus:9090`, the service's, Alertmanager's) and nothing else of the run
exists (not the load generator, the upstream, the bus or the host). Each `run` is
one container of the box image (`_box_image`):

    docker run --rm --init --network <agent network> --cap-drop ALL
        --security-opt no-new-privileges --read-only --tmpfs /tmp --user <uid>:<gid>
        -v <workspace>:/workspace -v <home>:/home/agent -v <bin>:/opt/oncall/bin:ro
        -v <stage>:/opt/oncall/stage:ro -v <relays>:/run/net:ro --env-file <0600 file>
        <image> <argv>

Besides a profile's install folders (read-only, as bubblewrap binds them), nothing
else of the host is mounted: no engine home, no records, no scenario folder,
no bus credential. A host file the command names (a scripted agent's script, the
reference fix) is copied into the session's read-only `stage` folder and named there;
system paths of the image (`/bin/sh`, `/usr/bin/python3`) are left as they are. A
loopback endpoint of the runner the agent is allowed (the model proxy) is relayed as
under `host-sandboxed` (`_egress`): the shared relay listens on the same
`127.0.0.1:<port>` in the box's own network namespace and joins each connection to a
unix socket of the bound relay folder, so the URL in the agent's env works unchanged.
The env travels in a 0600 file, never on a command line. The container is labelled
with the session's marker and removed (`docker rm -f`) after every run, whatever ended
it: a budget that fired, a cancelled runner, a command that left processes behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from sreforge_contracts import SandboxKind

from sreforge_runner._agent_sandbox import SessionLayout, agent_env, write_git_identity
from sreforge_runner._box_image import ensure_box_image
from sreforge_runner._bwrap import (
    SANDBOX_BIN,
    SANDBOX_HOME,
    SANDBOX_NET,
    SANDBOX_WORKSPACE,
    shown_at,
)
from sreforge_runner._egress import HostEgress, parse_endpoint
from sreforge_runner._errors import SandboxError
from sreforge_runner._process import Budgets, ProcessOutcome, run_in_group
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._submit import exclude_sentinel_dir, install_submit

__all__ = ["BOX_LABEL", "BOX_STAGE", "BoxSandbox"]

BOX_LABEL = "org.sreforge.agent-session"
"""The label every box container carries (value: the session's marker)."""
BOX_STAGE = Path("/opt/oncall/stage")
"""Where the host files a command names are shown, read-only."""
_IMAGE_PATHS = tuple(Path(p) for p in ("/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc"))
_ENV_FILE = "box.env"
_CLIENT_ENV = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT")
_DOCKER_TIMEOUT_S = 60.0


@dataclass
class BoxSandbox(SessionLayout):
    """The agent's sandbox as containers on the run's agent network (`in-box`)."""

    workspace: Path
    root: Path
    settings: RunnerSettings
    network: str
    """The Docker network the box joins (the stack's `<project>_agent`)."""
    endpoints: dict[str, str] = field(default_factory=dict)
    """The page's endpoints as the box reaches them (`http://prometheus:9090`)."""
    install_paths: tuple[str, ...] = ()
    """Host folders bound read-only into the box (the agent's install), at their own
    path or where `mount_at` shows them."""
    mount_at: dict[str, str] = field(default_factory=dict)
    kind: SandboxKind = "in-box"
    confinement: SandboxKind | None = field(default=None, init=False)
    """`in-box` once `create` made the session (None until then)."""
    downgrade: str | None = field(default=None, init=False)
    reaped: list[str] | None = field(default=None, init=False)
    """Not tracked by name: a command's leftovers die with its container."""
    loopback: tuple[str, ...] = field(default=(), init=False)
    """Runner loopback URLs relayed into the box (`allow_endpoint`: the model proxy)."""
    image: str | None = field(default=None, init=False)
    egress: HostEgress = field(init=False, repr=False)
    _runs: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.egress = HostEgress(self.root / "net")

    @property
    def marker(self) -> str:
        """This session's value of `AGENT_SESSION` (and of the containers' label)."""
        return str(self.root.resolve())

    @property
    def confined(self) -> bool:
        """True once the agent's paths are the box's (see `inside`)."""
        return self.confinement == "in-box"

    @property
    def stage_dir(self) -> Path:
        """The host side of `BOX_STAGE` (removed on destroy)."""
        return self.root / "stage"

    def inside(self, host_path: Path) -> Path:
        """How a host path under the workspace, HOME or bin looks inside the box."""
        mounts = ((self.workspace, SANDBOX_WORKSPACE), (self.home, SANDBOX_HOME))
        for host, mounted in (*mounts, (self.bin_dir, SANDBOX_BIN), (self.stage_dir, BOX_STAGE)):
            if host_path == host or host_path.is_relative_to(host):
                return mounted / host_path.relative_to(host)
        raise SandboxError(f"{host_path} is not visible inside the box")

    def allow_endpoint(self, url: str) -> None:
        """Accept the page's in-network endpoints as they are; relay a loopback `url` of
        the runner into the box (call before `run`); refuse anything else."""
        if urlsplit(url).netloc in {urlsplit(known).netloc for known in self.endpoints.values()}:
            return
        parse_endpoint(url)  # SandboxError: neither the network's nor the runner's loopback
        if url not in self.loopback:
            self.loopback = (*self.loopback, url)

    def create(self) -> None:
        """Ensure the box image, make HOME (neutral git identity), bin and stage, install
        `submit`; the network must exist (the stack is up)."""
        if not (self.workspace / ".git").exists():
            raise SandboxError(f"workspace {self.workspace} is not a git checkout")
        self.image = ensure_box_image(
            self._docker(), self.settings.box_base_image, self.settings.box_lock_dir
        )
        self._docker_call("network", "inspect", "--format", "{{.Name}}", self.network)
        self.confinement = "in-box"
        try:
            for folder in (self.home, self.bin_dir, self.stage_dir):
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.egress.install()
            self.session_dir.mkdir(exist_ok=True)
            install_submit(self.bin_dir, self.inside(self.workspace))
            exclude_sentinel_dir(self.workspace)
            write_git_identity(self.settings, self.home, self.workspace)
        except OSError as error:
            raise SandboxError(f"sandbox in {self.root}: {error}") from error

    def network_metadata(self) -> dict[str, object]:
        """What the agent's network was: the run's agent network, its page's names."""
        if not self.confined:
            return {}
        names = sorted(urlsplit(url).netloc for url in self.endpoints.values())
        relayed = sorted({parse_endpoint(url).port for url in self.loopback})
        found: dict[str, object] = {"egress": "agent-network", "network": self.network}
        return {**found, "reachable": names, "egress_ports": relayed}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The agent's whole environment, with the box's paths."""
        return agent_env(
            self.settings,
            bin_dir=SANDBOX_BIN,
            home=SANDBOX_HOME,
            workspace=SANDBOX_WORKSPACE,
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
        """Run the command in a fresh box container within its budgets (stdin closed);
        the container is removed afterwards, whatever ended it."""
        if not self.confined or self.image is None:
            raise SandboxError(f"box in {self.root}: the sandbox was not created")
        command = [self._stage(arg) for arg in argv]
        if self.loopback:
            self.egress.open(parse_endpoint(url) for url in self.loopback)
            command = self.egress.command(command)
        self._runs += 1
        name = f"sreforge-box-{_digest(self.marker)}-{self._runs}"
        env_file = self.root / _ENV_FILE
        env_file.touch(mode=0o600)
        env_file.write_text(_env_lines(self.env(extra_env)))
        try:
            return await run_in_group(
                [*self._docker_run(name, env_file), self.image, *command],
                cwd=self.root,
                env={k: os.environ[k] for k in _CLIENT_ENV if k in os.environ},
                budget_s=budget_s,
                log_path=log_path or self.log_path,
                transcript_path=self.transcript_path if transcript else None,
                grace_s=self.settings.kill_grace_seconds,
            )
        finally:
            env_file.unlink(missing_ok=True)
            await asyncio.to_thread(self._remove_containers)

    def _docker_run(self, name: str, env_file: Path) -> list[str]:
        uid, gid = os.getuid(), os.getgid()
        mounts = [
            (self.workspace, SANDBOX_WORKSPACE, ""),
            (self.home, SANDBOX_HOME, ""),
            (self.bin_dir, SANDBOX_BIN, ",readonly"),
            (self.stage_dir, BOX_STAGE, ",readonly"),
            (self.egress.folder, SANDBOX_NET, ",readonly"),
        ]
        command = [self._docker(), "run", "--rm", "--init", "--name", name]
        command += ["--label", f"{BOX_LABEL}={self.marker}", "--network", self.network]
        command += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        command += ["--read-only", "--tmpfs", "/tmp:rw,exec,mode=1777", "--pids-limit", "512"]
        command += ["--user", f"{uid}:{gid}", "--workdir", str(SANDBOX_WORKSPACE)]
        command += ["--env-file", str(env_file)]
        installs = [
            (Path(p), Path(shown_at(p, self.mount_at)), ",readonly") for p in self.install_paths
        ]
        for host, inside, mode in [*mounts, *installs]:
            command += ["--mount", f"type=bind,source={host.resolve()},target={inside}{mode}"]
        return command

    def _stage(self, arg: str) -> str:
        """`arg`, or where a host file it names is shown in the box (copied to stage)."""
        path = Path(arg)
        if not path.is_absolute() or not path.is_file():
            return arg
        if any(path == p or path.is_relative_to(p) for p in _IMAGE_PATHS):
            return arg
        if any(path.is_relative_to(p) for p in self.install_paths):
            return shown_at(arg, self.mount_at)  # bound as it is
        with contextlib.suppress(SandboxError):
            return str(self.inside(path))  # already mounted (workspace, HOME, bin)
        dest = self.stage_dir / f"{_digest(str(path.resolve()))}-{path.name}"
        shutil.copyfile(path, dest)
        dest.chmod(0o644 if not os.access(path, os.X_OK) else 0o755)
        return str(BOX_STAGE / dest.name)

    def survivors(self) -> list[int]:
        """Host pids of this session's box containers still running (should be none)."""
        pids = []
        for container in self._containers():
            with contextlib.suppress(SandboxError, ValueError):
                state = self._docker_call("inspect", "--format", "{{.State.Pid}}", container)
                if int(state.strip() or 0) > 0:
                    pids.append(int(state.strip()))
        return pids

    def settled_survivors(self, within_s: float = 3.0) -> list[int]:
        """Survivors still there after giving removed containers `within_s` to go."""
        deadline = time.monotonic() + within_s
        found = self.survivors()
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = self.survivors()
        return found

    def kill_leftovers(self) -> None:
        """Remove the containers an earlier, interrupted runner left for this session."""
        with contextlib.suppress(SandboxError):
            self._remove_containers()

    def destroy(self) -> None:
        """Remove every container of the session, stop the relays, then remove HOME, bin,
        stage and the relays' folder (the logs stay)."""
        self._remove_containers()
        self.egress.close()
        for folder in (self.home, self.bin_dir, self.stage_dir, self.egress.folder):
            try:
                shutil.rmtree(folder)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise SandboxError(f"cannot remove {folder}: {error}") from error
        (self.root / _ENV_FILE).unlink(missing_ok=True)

    def _containers(self) -> list[str]:
        found = self._docker_call(
            "ps", "-aq", "--no-trunc", "--filter", f"label={BOX_LABEL}={self.marker}"
        )
        return found.split()

    def _remove_containers(self) -> None:
        containers = self._containers()
        if containers:
            self._docker_call("rm", "-f", *containers)

    def _docker(self) -> str:
        found = shutil.which(self.settings.docker_path)
        if found is None:
            raise SandboxError(f"in-box: no docker CLI ({self.settings.docker_path!r})")
        return found

    def _docker_call(self, *args: str) -> str:
        try:
            done = subprocess.run(
                [self._docker(), *args], capture_output=True, text=True, check=False,
                timeout=_DOCKER_TIMEOUT_S,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxError(f"in-box: docker {args[0]}: {error}") from error
        if done.returncode != 0:
            raise SandboxError(f"in-box: docker {' '.join(args[:2])}: {done.stderr.strip()[-400:]}")
        return done.stdout


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _env_lines(env: dict[str, str]) -> str:
    """`NAME=value` lines for `docker run --env-file` (which allows no newline in a value)."""
    for name, value in env.items():
        if "\n" in value or "\n" in name or "=" in name or not name:
            raise SandboxError(f"agent env: {name!r} cannot be passed into the box")
    return "".join(f"{name}={value}\n" for name, value in env.items())
