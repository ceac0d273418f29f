"""host-sandboxed egress: its own network namespace, only the allowlisted loopback ports."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sreforge_bus import STREAM, Bus, bootstrap
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import consumer_settled, poll
from sreforge_contracts import (
    AgentContext,
    BriefReady,
    EvalOnly,
    HarnessProfile,
    OperationalReadiness,
    ResolvedExecutionContext,
    RunContract,
    RunState,
    RunWorkspace,
    ScenarioRef,
    StackInfo,
    Submitted,
    parse_event,
)
from sreforge_runner import (
    AgentSandbox,
    Budgets,
    CommandRein,
    Dispatch,
    HostSandbox,
    RunnerSettings,
    SandboxError,
    build_service,
    drive,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

# Run inside the sandbox: the interfaces it has, then each URL fetched, each port dialled.
_PROBE = """
import hashlib, socket, sys, urllib.request
print("INTERFACES", ",".join(sorted(name for _, name in socket.if_nameindex())), flush=True)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
fetch, dial = sys.argv[1].split(), sys.argv[2].split()
for url in fetch:
    body = opener.open(url, timeout=20).read()
    print("GOT", url, len(body), hashlib.sha256(body).hexdigest(), flush=True)
for port in dial:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
        print("CONNECTED", port, flush=True)
    except OSError as error:
        print("UNREACHABLE", port, type(error).__name__, flush=True)
"""


class _Payload(BaseHTTPRequestHandler):
    """Answers every GET with the server's payload (large: the relay must copy it all)."""

    def do_GET(self) -> None:
        payload: bytes = self.server.payload  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def http_servers() -> Iterator[list[ThreadingHTTPServer]]:
    """Two real HTTP servers on free host loopback ports, each with its own 1 MiB payload."""
    servers = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Payload)
        server.payload = os.urandom(1 << 20)  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    """A plain TCP listener on a free host loopback port (not on any allowlist)."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield listener
    finally:
        listener.close()


def _context(name: str = "probe") -> ResolvedExecutionContext:
    return ResolvedExecutionContext(
        request_id="run-egress",
        profile=HarnessProfile(name=name, rein="scripted", sandbox="host-sandboxed"),
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


class _AllowsInSession:
    """A rein that allows one more endpoint at start_session, as the model proxy's does."""

    def __init__(self, inner: CommandRein, url: str) -> None:
        self.inner, self.url, self.name = inner, url, inner.name

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Allow the extra endpoint."""
        sandbox.allow_endpoint(self.url)

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run the command."""
        return await self.inner.dispatch(sandbox, budgets)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to clean."""


@needs_bwrap
async def test_the_agent_reaches_only_its_allowlisted_endpoints_at_their_own_ports(
    project: Any,
    settings: RunnerSettings,
    http_servers: list[ThreadingHTTPServer],
    host_listener: socket.socket,
    nats_server: NatsServer,
) -> None:
    """Inside, only `lo` exists; both allowed servers (one from the constructor, one allowed
    at start_session) answer at their own 127.0.0.1:port with every byte; a listening host
    port off the list and the real NATS port are unreachable; evidence names the ports."""
    api, proxy = http_servers
    other = host_listener.getsockname()[1]
    urls = f"{_url(api)}/v1/items {_url(proxy)}/chat"
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        endpoints=(_url(api),),
    )
    argv = ("/usr/bin/python3", "-c", _PROBE, urls, f"{other} {nats_server.port}")
    rein = _AllowsInSession(CommandRein("probe", argv), _url(proxy) + "/v1")
    run = await drive(_context(), rein, sandbox, Budgets(60))
    out = sandbox.log_path.read_text()
    assert run.ok, (run.result.evidence, out)
    assert run.result.evidence.confinement == "host-sandboxed"
    assert "INTERFACES lo" in out.splitlines(), out
    for server, url in zip((api, proxy), urls.split(), strict=True):
        payload: bytes = server.payload  # type: ignore[attr-defined]
        digest = hashlib.sha256(payload).hexdigest()
        assert f"GOT {url} {len(payload)} {digest}" in out.splitlines(), out
    assert f"UNREACHABLE {other} ConnectionRefusedError" in out.splitlines(), out
    assert f"UNREACHABLE {nats_server.port} ConnectionRefusedError" in out.splitlines(), out
    ports = sorted(server.server_address[1] for server in http_servers)
    assert run.result.evidence.metadata["egress"] == "allowlist"
    assert run.result.evidence.metadata["egress_ports"] == ports
    assert run.result.evidence.survivors == 0


@needs_bwrap
async def test_the_relays_die_with_the_session_and_cut_open_connections(
    project: Any, settings: RunnerSettings, host_listener: socket.socket
) -> None:
    """An agent that holds a relayed connection open and hangs is stopped by the watchdog;
    nothing of the session survives, the host end of its connection is closed, and the
    relays' folder is gone."""
    port = host_listener.getsockname()[1]
    hold = (
        "import socket, time\n"
        f"conn = socket.create_connection(('127.0.0.1', {port}))\n"
        "conn.sendall(b'hello')\n"
        "print('holding', flush=True)\n"
        "time.sleep(300)\n"
    )
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        endpoints=(f"http://localhost:{port}",),
    )
    accepted: list[socket.socket] = []
    host_listener.settimeout(60)
    acceptor = threading.Thread(
        target=lambda: accepted.append(host_listener.accept()[0]), daemon=True
    )
    acceptor.start()
    budgets = Budgets(total_s=60, idle_s=1.0, session_start_s=30)
    argv = ("/usr/bin/python3", "-c", hold)
    run = await drive(_context(), _Watched(argv), sandbox, budgets)
    acceptor.join(timeout=10)
    assert accepted, sandbox.log_path.read_text()
    assert run.result.evidence.timeout == "idle", run.result.evidence
    assert run.result.evidence.survivors == 0
    assert sandbox.survivors() == []
    far_end = accepted[0]
    far_end.settimeout(10)
    assert _recv_to_eof(far_end) == b"hello"  # then EOF: the connection did not outlive it
    far_end.close()
    assert not sandbox.egress.folder.exists()
    assert sandbox.egress.opened == ()


class _Watched:
    """Runs one command under all three budgets (the built-in reins use only total)."""

    def __init__(self, argv: tuple[str, ...]) -> None:
        self.argv, self.name = argv, "hold"

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to start."""

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run under every budget."""
        started = time.monotonic()
        return Dispatch.of(await sandbox.run(self.argv, budgets), started)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to clean."""


@needs_bwrap
async def test_an_endpoint_that_cannot_be_relayed_fails_at_sandbox_create(
    project: Any, settings: RunnerSettings
) -> None:
    """A non-loopback endpoint under host-sandboxed stops the run at sandbox_create, naming
    the URL, before the agent runs."""
    url = "http://192.0.2.10:8080"
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        endpoints=(url,),
    )
    run = await drive(_context(), CommandRein("true", ("/bin/true",)), sandbox, Budgets(30))
    assert run.result.evidence.failure_stage == "sandbox_create"
    assert url in (run.result.tool_error or "")
    assert run.dispatch is None


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.5:80", "https://example.org/v1", "nats://127.0.0.1:4222", "127.0.0.1:80"],
)
def test_allow_endpoint_accepts_only_loopback_http_urls(
    project: Any, settings: RunnerSettings, url: str
) -> None:
    """allow_endpoint refuses anything but http(s) on a loopback host, naming the URL."""
    sandbox = HostSandbox(project.workspace, project.workspace.parent / "agent", settings)
    with pytest.raises(SandboxError, match=re.escape(url)):
        sandbox.allow_endpoint(url)
    assert sandbox.endpoints == ()


def test_allow_endpoint_records_each_url_once(project: Any, settings: RunnerSettings) -> None:
    """Loopback URLs (127.0.0.1, localhost, default ports) are kept once each, in order."""
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        endpoints=("http://127.0.0.1:5001",),
    )
    for url in ("http://127.0.0.1:9090", "http://localhost/", "http://127.0.0.1:9090"):
        sandbox.allow_endpoint(url)
    assert sandbox.endpoints == (
        "http://127.0.0.1:5001",
        "http://127.0.0.1:9090",
        "http://localhost/",
    )


async def test_host_open_keeps_the_host_network_and_says_so(
    project: Any, settings: RunnerSettings, host_listener: socket.socket
) -> None:
    """host-open is no network boundary: any host port is reachable, evidence says `host`."""
    port = host_listener.getsockname()[1]
    dial = f"import socket; socket.create_connection(('127.0.0.1', {port})).close()"
    sandbox = HostSandbox(project.workspace, project.workspace.parent / "agent", settings)
    run = await drive(
        _context(), CommandRein("dial", (sys.executable, "-c", dial)), sandbox, Budgets(30)
    )
    assert run.ok, (run.result.evidence, sandbox.log_path.read_text())
    assert run.result.evidence.metadata["egress"] == "host"
    assert "egress_ports" not in run.result.evidence.metadata


def _recv_to_eof(sock: socket.socket) -> bytes:
    """Everything until the peer closes (the socket's timeout bounds the wait)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


@needs_bwrap
async def test_the_runner_allows_exactly_the_runs_agent_endpoints(
    bus: Bus,
    nats_server: NatsServer,
    project: Any,
    settings: RunnerSettings,
    tmp_path: Path,
    http_servers: list[ThreadingHTTPServer],
) -> None:
    """Through the runner's handoff, the run's `agent_endpoints` are the allowlist: the
    listed API answers inside at its own URL; an unlisted host server and the runner's own
    bus do not; the Submitted evidence names the one port."""
    api, unlisted = http_servers
    install = tmp_path / "probe-install"
    install.mkdir()
    agent = install / "probe-agent"
    agent.write_text(f"#!/usr/bin/python3\n{_PROBE}")
    agent.chmod(0o755)
    agents = tmp_path / "agents"
    shutil.copytree(settings.agents_dir, agents)
    dial = f"{unlisted.server_address[1]} {nats_server.port}"
    (agents / "probe-cli.toml").write_text(
        'name = "probe-cli"\nrein = "command"\nsandbox = "host-sandboxed"\n'
        f'[command]\npreset = "custom"\nexecutable = "{agent}"\n'
        f'args = ["{_url(api)}/health", "{dial}"]\ninstall_paths = ["{install}"]\n'
    )
    service = build_service(settings.model_copy(update={"agents_dir": agents}))
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        await bus.publish(await _brief(bus, project, {"api": _url(api)}))
        await poll(lambda: consumer_settled(bus, "runner"), "runner to handle BriefReady", 60)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    out = (project.workspace.parent / "agent" / "output.log").read_text().splitlines()
    payload: bytes = api.payload  # type: ignore[attr-defined]
    got = f"GOT {_url(api)}/health {len(payload)} {hashlib.sha256(payload).hexdigest()}"
    assert got in out, out
    for port in dial.split():
        assert f"UNREACHABLE {port} ConnectionRefusedError" in out, out
    [raw] = await _stored(bus, "sreforge.run.run-egress.Submitted")
    submitted = parse_event(raw)
    assert isinstance(submitted, Submitted)
    metadata = submitted.submission.evidence["metadata"]
    assert isinstance(metadata, dict), submitted.submission.evidence
    assert metadata["egress_ports"] == [api.server_address[1]], metadata


async def _brief(bus: Bus, project: Any, endpoints: dict[str, str]) -> BriefReady:
    """Put a briefed run with these agent endpoints in KV; the BriefReady for it."""
    workspace = RunWorkspace(path=str(project.workspace), service="api")
    state = RunState(
        run_id="run-egress",
        scenario_id=project.scenario_id,
        agent="probe-cli",
        time_scale=0.1,
        alert_route="r0ute",
        phase="briefed",
        stack=StackInfo(
            stack="local",
            run_dir=str(project.workspace.parent),
            agent_endpoints=endpoints,
            operator_endpoints=endpoints,
            run_workspace=workspace,
        ),
    )
    await bus.runs.put(state.run_id, state.model_dump_json().encode())
    contract = RunContract(
        agent_context=AgentContext(services=endpoints, run_workspace=workspace),
        scenario=ScenarioRef(id=project.scenario_id, run_id=state.run_id),
        eval_only=EvalOnly(
            alert_to_clear="CheckoutLatencyHigh",
            max_clear_time_seconds=60,
            sustained_clear_seconds=36,
        ),
    )
    return BriefReady(run_id=state.run_id, producer="context", page="# page\n", contract=contract)


async def _stored(bus: Bus, subject: str) -> list[bytes]:
    """Every message the stream holds on exactly `subject`."""
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    sub = await bus.js.subscribe(subject, ordered_consumer=True)
    try:
        return [(await sub.next_msg(timeout=5)).data for _ in range(count)]
    finally:
        await sub.unsubscribe()
