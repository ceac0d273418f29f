"""The `remote` sandbox against a real sshd on 127.0.0.1 (started per test, own keys)."""

from __future__ import annotations

import asyncio
import getpass
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from sreforge_contracts import (
    AgentTranscript,
    CommandSpec,
    HarnessProfile,
    OperationalReadiness,
    ProfileLimits,
    RemoteSpec,
    ResolvedExecutionContext,
)
from sreforge_runner import (
    SESSION_MARKER,
    TRANSCRIPT_FILE,
    AgentSandbox,
    Budgets,
    CliAgentRein,
    CommandRein,
    Dispatch,
    RemoteSandbox,
    RunnerSettings,
    check_profile,
    drive,
    head_commit,
    read_sentinel,
    workspace_diff,
)

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = pytest.mark.skipif(
    not Path(SSHD).is_file(), reason="openssh-server (sshd) is not installed"
)

FIXTURES = Path(__file__).parent / "fixtures"
_SSHD_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitUserEnvironment no
LogLevel ERROR
"""


@dataclass(frozen=True)
class Sshd:
    """A running sshd on loopback: its port, pinned host key and the client's key."""

    port: int
    host_key: str
    client_key: Path
    base_dir: Path

    def spec(self, **fields: Any) -> RemoteSpec:
        """A remote spec for this sshd (overrides in `fields`)."""
        values: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": getpass.getuser(),
            "host_key": self.host_key,
            "identity_file": str(self.client_key),
            "base_dir": str(self.base_dir),
        }
        return RemoteSpec.model_validate({**values, **fields})


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True
    )
    return path.with_suffix(".pub").read_text().strip()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_banner(port: int, process: subprocess.Popen[bytes], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"sshd exited {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                if conn.recv(64).startswith(b"SSH-2.0"):
                    return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"sshd did not answer on 127.0.0.1:{port} within {within_s} s")


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """A private sshd (own config, host key and authorized client key) on a free port."""
    keys = tmp_path / "ssh"
    keys.mkdir()
    host_key = _keygen(keys / "host_ed25519")
    (keys / "authorized_keys").write_text(_keygen(keys / "client_ed25519") + "\n")
    port = _free_port()
    config = keys / "sshd_config"
    config.write_text(
        _SSHD_CONFIG.format(
            port=port,
            host_key=keys / "host_ed25519",
            pid_file=keys / "sshd.pid",
            authorized=keys / "authorized_keys",
        )
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation dir
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    try:
        _wait_for_banner(port, process, within_s=20)
        yield Sshd(port, host_key, keys / "client_ed25519", tmp_path / "remote-base")
    finally:
        process.kill()
        process.wait(timeout=10)


def _context(profile: HarnessProfile) -> ResolvedExecutionContext:
    return ResolvedExecutionContext(
        request_id="run-remote",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )


def _profile(sshd: Sshd, **fields: Any) -> HarnessProfile:
    fields.setdefault("rein", "scripted")
    return HarnessProfile(name="remote-probe", sandbox="remote", remote=sshd.spec(), **fields)


def _sandbox(project: Any, settings: RunnerSettings, spec: RemoteSpec) -> RemoteSandbox:
    return RemoteSandbox(project.workspace, project.workspace.parent / "agent", settings, spec)


def _marked(marker: str) -> list[int]:
    """Local pids whose env carries `marker` (the 'remote' is this machine)."""
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get(SESSION_MARKER) == marker:
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


async def test_a_cli_agent_runs_remotely_and_its_work_arrives_on_the_host(
    project: Any, settings: RunnerSettings, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command rein drives the fake CLI agent over ssh: it reads the page in the remote
    HOME, edits the remote workspace and runs `submit --rca`; the diff, the sentinel and the
    RCA are on the host afterwards, output is stamped into the transcript, the routed
    credential reaches it (never the evidence), confinement is `remote`, remote_dir is gone."""
    monkeypatch.setenv("FAKE_AGENT_TOKEN", "tok-remote-value")
    profile = HarnessProfile(
        name="fake-cli",
        rein="command",
        sandbox="remote",
        remote=sshd.spec(),
        model="fake-1",
        credential_routes=("FAKE_AGENT_TOKEN",),
        limits=ProfileLimits(session_start_s=30, idle_s=30, total_s=60),
        command=CommandSpec(
            preset="custom",
            executable=str(FIXTURES / "fake-agent"),
            args=("--prompt-file", "{prompt_file}"),
        ),
    )
    base = head_commit(project.workspace)
    page = "# Checkout latency is high\n\nEdit file: cache_settings.py\n"
    sandbox = _sandbox(project, settings, sshd.spec())
    run = await drive(_context(profile), CliAgentRein(profile, page), sandbox, Budgets(60, 30, 30))
    log = sandbox.log_path.read_text()
    assert run.ok, (run.result.evidence, log)
    evidence = run.result.evidence
    assert (evidence.sandbox_requested, evidence.confinement) == ("remote", "remote")
    assert evidence.survivors == 0
    assert sandbox.remote_dir is not None
    assert str(sandbox.remote_dir.parent) == str(sshd.base_dir)
    assert _gone(sandbox.remote_dir)
    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, log
    assert sentinel.rca is not None
    assert "TTL" in sentinel.rca
    assert "+TTL = 60" in workspace_diff(project.workspace, base).splitlines()
    lines = [json.loads(line) for line in sandbox.transcript_path.read_text().splitlines()]
    assert {line["stream"] for line in lines} == {"stdout", "stderr"}
    texts = [line["text"] for line in lines]
    assert "fake-agent: stdin closed" in texts
    assert "token routed: yes" in texts
    assert "careless debug line: key=[REDACTED:FAKE_AGENT_TOKEN]" in texts
    assert "tok-remote-value" not in run.result.model_dump_json()
    assert "tok-remote-value" not in log
    assert not sandbox.home.exists()
    transcript = AgentTranscript.model_validate_json((sandbox.root / TRANSCRIPT_FILE).read_text())
    assert (transcript.confinement, transcript.harness) == ("in-box", "fake-cli")


async def test_a_wrong_pinned_host_key_is_refused_at_sandbox_create(
    project: Any, settings: RunnerSettings, sshd: Sshd, tmp_path: Path
) -> None:
    """A server whose key is not the pinned one is never talked to: the run stops at
    sandbox_create, the error names the host key, no session starts, nothing is made."""
    impostor = _keygen(tmp_path / "other_host_key")
    spec = sshd.spec(host_key=impostor)
    sandbox = _sandbox(project, settings, spec)
    rein = _Counting(CommandRein("never", ("/bin/true",)))
    run = await drive(_context(_profile(sshd)), rein, sandbox, Budgets(30))
    evidence = run.result.evidence
    assert evidence.failure_stage == "sandbox_create", evidence
    assert "host key" in evidence.failures[0].error
    assert evidence.confinement is None
    assert run.dispatch is None
    assert rein.started == 0
    assert not sshd.base_dir.exists()
    assert evidence.sandbox_destroy == "succeeded"


async def test_a_remote_agent_that_hangs_is_stopped_and_nothing_of_it_survives(
    project: Any, settings: RunnerSettings, sshd: Sshd
) -> None:
    """The idle watchdog fires over ssh; the remote group (by its recorded pgid) and a
    process that escaped it with setsid (by the session marker) are killed; remote_dir goes."""
    token = f"hang-{uuid.uuid4().hex}"
    script = (
        f"(setsid sh -c 'sleep 300' {token}-escaped &); sh -c 'sleep 300' {token}-child & "
        "echo started; wait"
    )
    sandbox = _sandbox(project, settings, sshd.spec())
    rein = _Watched(CommandRein("hang", ("/bin/sh", "-c", script)), token)
    profile = _profile(sshd, limits=ProfileLimits(session_start_s=30, idle_s=1, total_s=60))
    run = await drive(_context(profile), rein, sandbox, Budgets(60, 1.0, 30))
    evidence = run.result.evidence
    assert evidence.timeout == "idle", (evidence, sandbox.log_path.read_text())
    assert evidence.failure_stage == "execution"
    assert evidence.confinement == "remote"
    assert evidence.survivors == 0
    assert run.dispatch is not None
    assert run.dispatch.duration_ms < 30_000
    assert rein.seen == {f"{token}-escaped", f"{token}-child"}, "the agent's processes never ran"
    assert sandbox.agent_pgid is not None
    assert _group(sandbox.agent_pgid) == []
    assert sandbox.remote_dir is not None
    assert _marked(str(sandbox.remote_dir)) == []
    assert token not in _ps()
    assert _gone(sandbox.remote_dir)


async def test_a_cancelled_remote_run_leaves_no_remote_process(
    project: Any, settings: RunnerSettings, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling the runner's task mid-run (shutdown) still kills the remote group. The
    identity here comes by `identity_env` (the runner's variable names the key file)."""
    token = f"cancel-{uuid.uuid4().hex}"
    monkeypatch.setenv("SREFORGE_TEST_SSH_KEY", str(sshd.client_key))
    spec = sshd.spec(identity_file=None, identity_env="SREFORGE_TEST_SSH_KEY")
    sandbox = _sandbox(project, settings, spec)
    sandbox.create()
    try:
        running = asyncio.ensure_future(
            sandbox.run(["/bin/sh", "-c", f"sh -c 'sleep 300' {token}-child & wait"], 60)
        )
        deadline = time.monotonic() + 30
        while not await asyncio.to_thread(_running, token) and time.monotonic() < deadline:
            await asyncio.wait({running}, timeout=0.05)
        assert await asyncio.to_thread(_running, token), "the agent never started"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert await asyncio.to_thread(_running, token) == set()
        assert _marked(sandbox.marker) == []
    finally:
        sandbox.destroy()
    assert _gone(sandbox.remote_dir)


def test_a_restarted_runner_kills_the_leftover_session_and_takes_its_work_back(
    project: Any, settings: RunnerSettings, sshd: Sshd
) -> None:
    """`kill_leftovers` on a fresh sandbox over the same agent dir (as on resume) kills the
    recorded session's marked remote process, pulls its unsynced edit, removes remote_dir."""
    first = _sandbox(project, settings, sshd.spec())
    first.create()
    assert first.remote_dir is not None
    remote = Path(str(first.remote_dir))
    (remote / "workspace" / "left-behind.txt").write_text("work in progress\n")
    orphan = subprocess.Popen(
        ["sleep", "300"],
        env={"PATH": "/usr/bin:/bin", SESSION_MARKER: first.marker},
        start_new_session=True,
    )
    try:
        resumed = _sandbox(project, settings, sshd.spec())
        resumed.kill_leftovers()
        assert orphan.wait(timeout=20) == -9
    finally:
        orphan.kill()
        orphan.wait()
        first.destroy()  # closes its ssh control master (remote_dir is already gone)
    assert (project.workspace / "left-behind.txt").read_text() == "work in progress\n"
    assert not remote.exists()


def _gone(remote_dir: Any) -> bool:
    """True when the (loopback) remote_dir no longer exists."""
    return not Path(str(remote_dir)).exists()


def _ps() -> str:
    """`ps -eo pid,args`: every process's command line."""
    return subprocess.run(
        ["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True
    ).stdout


def _running(token: str) -> set[str]:
    """The `<token>-…` names of live local processes (the 'remote' is this machine)."""
    names: set[str] = set()
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        names.update(arg for arg in process.info["cmdline"] or () if arg.startswith(token))
    return names


def _group(pgid: int) -> list[int]:
    """Live (not zombie) local pids in process group `pgid`."""
    found = []
    for process in psutil.process_iter(["status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            stat = Path(f"/proc/{process.pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
            found.append(process.pid)
    return found


class _Counting:
    """A rein that counts its session starts (the wrong-key test expects none)."""

    def __init__(self, inner: CommandRein) -> None:
        self.inner = inner
        self.name = inner.name
        self.started = 0

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Count."""
        self.started += 1

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run the command."""
        return await self.inner.dispatch(sandbox, budgets)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to clean."""


class _Watched:
    """A script rein under all three budgets that also records, while the agent runs,
    which of its `<token>-…` processes it saw alive on the (loopback) remote."""

    def __init__(self, inner: CommandRein, token: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.token = token
        self.seen: set[str] = set()

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to start."""

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run under every budget."""
        started = time.monotonic()
        running = asyncio.ensure_future(sandbox.run(self.inner.argv, budgets))
        while not running.done() and len(self.seen) < 2:
            self.seen |= await asyncio.to_thread(_running, self.token)
            await asyncio.wait({running}, timeout=0.1)
        return Dispatch.of(await running, started)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to clean."""


def test_check_probes_a_remote_profile_over_ssh(
    sshd: Sshd, settings: RunnerSettings, tmp_path: Path
) -> None:
    """`agents check` runs the agent's `--version` on the remote host (pinned key): ready
    when it answers there, blocked, naming the host key, when the server is not the pinned one."""
    command = CommandSpec(preset="custom", executable="/bin/true")
    profile = HarnessProfile(
        name="remote-cli", rein="command", sandbox="remote", remote=sshd.spec(), command=command
    )
    ready = check_profile(profile, settings)
    assert ready.readiness.state == "ready", ready
    assert "coreutils" in ready.checks[-1].first_line
    assert "127.0.0.1" in ready.checks[-1].what
    impostor = profile.model_copy(
        update={"remote": sshd.spec(host_key=_keygen(tmp_path / "other_host_key"))}
    )
    blocked = check_profile(impostor, settings)
    assert blocked.readiness.state == "blocked"
    assert "host key verification failed" in str(blocked.readiness.evidence)
