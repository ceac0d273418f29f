"""The `in-box` sandbox against a real Docker engine: the agent's commands in a container
on an internal network, as on the compose topology's `<project>_agent` network.

A throwaway internal network holds one "page" container answering as `prometheus`. In
the box a script commits under the agent's identity, reaches the page's name and
submits; a host file it names is staged read-only; the host's folders (an engine home
with a canary) are not there, nor is a host-side listener; a budget that fires leaves
no container; the contamination guard's probe runs in the box. Skipped visibly without
an engine.
"""

from __future__ import annotations

import asyncio
import http.server
import secrets
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from sreforge_contracts import Tells
from sreforge_runner import (
    RunnerSettings,
    SandboxError,
    guard_sandbox,
    probe_sandbox,
    read_sentinel,
)
from sreforge_runner._box import BOX_LABEL, BOX_STAGE, BoxSandbox
from sreforge_runner._box_image import ensure_box_image

pytestmark = pytest.mark.docker

_PAGE_PORT = 9090


def _docker(*args: str, check: bool = True) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def box_network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An internal network without a host address (as the compose topology's agent
    network) with a `prometheus` container answering on 9090; removed after."""
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no Docker engine answers here (scripts/docker-engine start)")
    lock_dir = tmp_path_factory.mktemp("box-lock")
    try:
        image = ensure_box_image("docker", "local/bookworm", lock_dir)
    except Exception as error:  # no base image: say so, visibly
        pytest.skip(f"no box image: {error}")
    name = f"sreforge-boxtest-{secrets.token_hex(4)}"
    no_host = "com.docker.network.bridge.inhibit_ipv4=true"
    _docker("network", "create", "--internal", "-o", no_host, name)
    page = ""
    try:
        page = _docker(
            "run", "-d", "--rm", "--network", name, "--network-alias", "prometheus",
            image, "python3", "-m", "http.server", str(_PAGE_PORT),
        )  # fmt: skip
        yield name
    finally:
        if page:
            _docker("rm", "-f", page, check=False)
        _docker("network", "rm", name, check=False)


@pytest.fixture
def box(tiny_repo: Path, tmp_path: Path, box_network: str) -> Iterator[BoxSandbox]:
    """A created box on the test network; destroyed afterwards."""
    settings = RunnerSettings(box_lock_dir=tmp_path / "lock", kill_grace_seconds=1.0)
    sandbox = BoxSandbox(
        tiny_repo,
        tmp_path / "agent",
        settings,
        box_network,
        {"prometheus": f"http://prometheus:{_PAGE_PORT}"},
    )
    sandbox.root.mkdir()
    sandbox.create()
    yield sandbox
    sandbox.destroy()


def _containers(sandbox: BoxSandbox) -> str:
    return _docker("ps", "-aq", "--filter", f"label={BOX_LABEL}={sandbox.marker}")


@pytest.mark.timeout(180)
def test_a_boxed_script_commits_reaches_the_page_and_submits(
    box: BoxSandbox, tmp_path: Path, run_git: Callable[..., str]
) -> None:
    """The script (a host file, staged read-only) edits, commits under the agent's
    identity, fetches the page's endpoint by name and submits; the box is gone after."""
    script = tmp_path / "fix.sh"
    script.write_text(
        "echo 'TTL = 60' > app.py\n"
        "git commit -q -am 'Raise the TTL'\n"
        f"python3 -c \"import urllib.request as u; u.urlopen('{box.endpoints['prometheus']}/')\"\n"
        "echo staged-at: $0\n"
        "submit\n"
    )
    outcome = asyncio.run(box.run(["/bin/sh", "-e", str(script)], 120.0))
    log = box.log_path.read_text()
    assert outcome.exit_code == 0, log
    assert f"staged-at: {BOX_STAGE}/" in log
    assert read_sentinel(box.workspace, box.settings.max_rca_bytes) is not None
    author = run_git(box.workspace, "log", "-1", "--format=%an <%ae>").strip()
    assert author == f"{box.settings.agent_git_name} <{box.settings.agent_git_email}>"
    assert box.confinement == "in-box"
    assert not _containers(box), "the box container outlived its command"
    assert not (box.root / "box.env").exists(), "the env file stayed"


@pytest.mark.timeout(180)
def test_the_box_shows_no_host_folder_or_listener(box: BoxSandbox, tmp_path: Path) -> None:
    """An engine home with a canary is not in the box, nor is a host-side TCP listener on
    every address reachable (at any of the host's addresses, its network's gateway's);
    the workspace is there, read-write."""
    home = tmp_path / "engine-home"
    home.mkdir()
    (home / "bus.creds").write_text(f"canary-{secrets.token_hex(8)}\n")
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    port = listener.getsockname()[1]
    gateways = [  # the host's own addresses: its bridges' (the box network's too), eth0's
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET and not address.address.startswith("127.")
    ]
    box_gateway = _docker(
        "network", "inspect", box.network, "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"
    )  # fmt: skip
    gateways.append(box_gateway)
    dials = "".join(
        f"python3 -c \"import socket; socket.create_connection(('{ip}', {port}), 3)\" "
        f"2>/dev/null && echo reached-{ip} || echo blocked-{ip}\n"
        for ip in gateways
    )
    probe = tmp_path / "probe.sh"
    probe.write_text(
        f"test ! -e {home} && echo no-engine-home\n"
        "touch /workspace/.box-wrote && echo workspace-writable\n" + dials
    )
    try:
        outcome = asyncio.run(box.run(["/bin/sh", str(probe)], 60.0))
    finally:
        listener.close()
    log = box.log_path.read_text()
    assert outcome.exit_code == 0, log
    assert "no-engine-home" in log, log
    assert "workspace-writable" in log, log
    for ip in gateways:
        assert f"blocked-{ip}" in log, f"the box reached the host's listener at {ip}: {log}"
    assert (box.workspace / ".box-wrote").exists()


@pytest.mark.timeout(120)
def test_a_budget_that_fires_removes_the_box(box: BoxSandbox) -> None:
    """A command past its budget is stopped and its container removed: no survivor."""
    outcome = asyncio.run(box.run(["/bin/sleep", "60"], 3.0))
    assert outcome.timeout == "total"
    assert box.settled_survivors() == []
    assert not _containers(box)


@pytest.mark.timeout(120)
def test_the_contamination_guard_probes_inside_the_box(box: BoxSandbox) -> None:
    """The probe runs in the box: the box's HOME and bin, the session marker; a tell put
    in the rein's env is found there and named without its value."""
    view = asyncio.run(probe_sandbox(box))
    assert view.env["HOME"] == "/home/agent"
    assert "submit" in view.bin_files
    tells = Tells.for_run("latency-cache-stampede", "BookshelfApiLatencyP99High", None)
    assert asyncio.run(guard_sandbox(box, tells)) is None
    hit = asyncio.run(guard_sandbox(box, tells, {"HINT": "latency-cache-stampede"}))
    assert hit is not None
    assert "env" in hit, hit
    assert "HINT=" not in hit, hit


@pytest.mark.timeout(120)
def test_an_allowed_runner_endpoint_is_relayed_into_the_box(box: BoxSandbox) -> None:
    """A loopback URL of the runner (as the model proxy's) answers in the box at the same
    URL through the relay; a URL that is neither the page's nor loopback is refused."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/models"
    try:
        box.allow_endpoint(url)
        box.allow_endpoint(box.endpoints["prometheus"])  # the page's: nothing to relay
        with pytest.raises(SandboxError, match="loopback"):
            box.allow_endpoint("http://example.org/")
        fetch = f"import urllib.request as u; print(u.urlopen('{url}', timeout=5).read().decode())"
        outcome = asyncio.run(box.run(["/usr/bin/python3", "-c", fetch], 60.0))
    finally:
        server.shutdown()
        server.server_close()
    log = box.log_path.read_text()
    assert outcome.exit_code == 0, log
    assert "hello from the runner" in log
    assert box.network_metadata()["egress_ports"] == [server.server_address[1]]


class _Hello(http.server.BaseHTTPRequestHandler):
    """Answers every GET with one line (a stand-in for the runner's model proxy)."""

    def do_GET(self) -> None:
        """One plain-text line."""
        body = b"hello from the runner\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.mark.timeout(120)
def test_a_profiles_install_folder_is_bound_read_only(
    tiny_repo: Path, tmp_path: Path, box_network: str
) -> None:
    """An executable under the profile's install path starts in the box at its own host
    path, unstaged, and cannot be written there."""
    install = tmp_path / "opt-agent"
    install.mkdir()
    tool = install / "tool"
    tool.write_text('#!/bin/sh\necho "tool-ran $0"\ntouch "$0.w" 2>/dev/null || echo read-only\n')
    tool.chmod(0o755)
    settings = RunnerSettings(box_lock_dir=tmp_path / "lock", kill_grace_seconds=1.0)
    sandbox = BoxSandbox(
        tiny_repo, tmp_path / "agent", settings, box_network, install_paths=(str(install),)
    )
    sandbox.root.mkdir()
    sandbox.create()
    try:
        outcome = asyncio.run(sandbox.run([str(tool)], 60.0))
    finally:
        sandbox.destroy()
    log = sandbox.log_path.read_text()
    assert outcome.exit_code == 0, log
    assert f"tool-ran {tool}" in log, log
    assert "read-only" in log, log
