"""The embedded nats-server: found from the wheel, ready on start, clean on stop."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from processes import gone
from sreforge_bus import ConnectError, NatsServerError, connect
from sreforge_bus.embedded import NatsServer, find_nats_server, start_nats_server

pytestmark = pytest.mark.integration


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_server_starts_restarts_on_the_same_port_and_cleans_up(tmp_path: Path) -> None:
    """A started server accepts connections; restart keeps port and store; close frees both."""
    store = tmp_path / "store"
    with start_nats_server(store_dir=store) as server:
        port = server.port
        assert server.url == f"nats://127.0.0.1:{port}"
        assert _accepts(port)
        server.restart()
        assert (server.port, server.store_dir) == (port, store)
        assert _accepts(port)
        log_file = server.log_file
    assert not _accepts(port)
    assert not log_file.exists()
    assert (store / "jetstream").is_dir()  # a caller's store dir is kept


def test_missing_binary_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bad NATS_SERVER_BIN override fails with an error naming the path tried."""
    missing = tmp_path / "no-such-nats-server"
    monkeypatch.setenv("NATS_SERVER_BIN", str(missing))
    with pytest.raises(NatsServerError, match="no-such-nats-server"):
        find_nats_server()


def test_server_that_cannot_start_points_at_its_log(nats_server: NatsServer) -> None:
    """A second server on a taken port exits; the error names the log file and quotes it."""
    with pytest.raises(NatsServerError, match=r"nats-server\.log") as failure:
        start_nats_server(port=nats_server.port)
    log_file = failure.value.log_file
    assert log_file is not None
    assert log_file.is_file()
    assert str(nats_server.port) in str(failure.value)
    shutil.rmtree(log_file.parent)


async def test_connect_to_nothing_fails_within_the_deadline() -> None:
    """An unreachable URL raises ConnectError naming it instead of retrying forever."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(ConnectError, match=str(port)):
        await connect(f"nats://127.0.0.1:{port}", name="nobody", connect_timeout=0.5)


_PARENT = """
import sys, time
from sreforge_bus.embedded import start_nats_server
server = start_nats_server(die_with_parent=sys.argv[1] == "dies")
print(server._proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(60)
def test_a_server_started_to_die_with_its_parent_stops_when_the_parent_is_killed() -> None:
    """A parent SIGKILLed has no chance to stop its server: one started with
    `die_with_parent` (as the engine starts its bus) exits anyway; one started without it
    outlives the parent (the control)."""
    servers = {}
    for mode in ("dies", "outlives"):
        parent = subprocess.Popen(
            [sys.executable, "-c", _PARENT, mode], stdout=subprocess.PIPE, text=True
        )
        assert parent.stdout is not None
        servers[mode] = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
    try:
        deadline = time.monotonic() + 20
        while not gone(servers["dies"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(servers["dies"]), "the server outlived its killed parent"
        assert not gone(servers["outlives"]), "the control died too: the test cannot tell"
    finally:
        for pid in servers.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
