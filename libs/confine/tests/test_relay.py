"""The relay script's lingering launcher mode, its LISTEN=CONNECT specs and its bound."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sreforge_confine import RELAY_SCRIPT
from sreforge_confine._relay import Relay, listen_tcp, tcp_connector

pytestmark = pytest.mark.timeout(60)


def _relay(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", "-S", str(RELAY_SCRIPT), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def test_linger_waits_for_every_descendant_and_keeps_the_commands_status(tmp_path: Path) -> None:
    """With --linger the relay outlives a command that exits before what it started (as
    bwrap's monitor does on SIGTERM); without it, it does not wait."""
    late = tmp_path / "late"
    orphan = f"(sleep 1; echo done > {late}) >/dev/null 2>&1 & exit 3"
    quick = _relay("--", "/bin/sh", "-c", orphan)
    assert quick.returncode == 3
    assert not late.exists()
    lingering = _relay("--linger", "--", "/bin/sh", "-c", orphan.replace("late", "late2"))
    assert lingering.returncode == 3, lingering.stderr
    assert (tmp_path / "late2").read_text() == "done\n"


def test_a_unix_listener_joins_a_tcp_endpoint_through_a_long_path(tmp_path: Path) -> None:
    """`unix:PATH=tcp:HOST:PORT` serves a socket whose path is longer than sun_path allows,
    and refuses a malformed spec before running anything."""
    far = socket.create_server(("127.0.0.1", 0))
    port = far.getsockname()[1]
    folder = tmp_path / ("deep-" * 20)
    folder.mkdir()
    path = folder / "up.sock"
    assert len(str(path)) > 108
    dial = (
        "import os, socket; fd = os.open(os.environ['D'], os.O_PATH); "
        "s = socket.socket(socket.AF_UNIX); s.connect(f'/proc/self/fd/{fd}/up.sock'); "
        "s.sendall(b'ping'); print(s.recv(4).decode())"
    )
    argv = [sys.executable, "-I", "-S", str(RELAY_SCRIPT), f"unix:{path}=tcp:127.0.0.1:{port}"]
    process = subprocess.Popen(
        [*argv, "--", sys.executable, "-c", dial],
        stdout=subprocess.PIPE,
        text=True,
        env={"D": str(folder)},
    )
    far.settimeout(20)
    conn, _ = far.accept()
    assert conn.recv(4) == b"ping"
    conn.sendall(b"pong")
    out, _ = process.communicate(timeout=20)
    assert out.strip() == "pong"
    assert process.returncode == 0
    conn.close()
    far.close()
    bad = _relay("tcp:nohost=unix:/x", "--", "echo", "ran")
    assert bad.returncode == 125
    assert "ran" not in bad.stdout


def test_connections_beyond_the_bound_wait_to_be_accepted_instead_of_piling_up() -> None:
    """With two slots, a third connection is not joined while two are open (a slow service
    holding given-up connections no longer grows the relay's threads), and is joined as
    soon as one of them ends."""
    far = socket.create_server(("127.0.0.1", 0))
    far.settimeout(10)
    listener = listen_tcp("127.0.0.1", 0)
    relay = Relay(listener, tcp_connector(*far.getsockname()[:2]), max_connections=2)
    relay.start()
    address = listener.getsockname()[:2]
    clients = [socket.create_connection(address, timeout=10) for _ in range(3)]
    accepted = [far.accept()[0] for _ in range(2)]
    # The two joins race each other to the far end: tell them apart by what each carries.
    for number, client in enumerate(clients[:2]):
        client.sendall(str(number).encode())
    joined: dict[bytes, socket.socket] = {}
    for sock in accepted:
        sock.settimeout(10)
        joined[sock.recv(1)] = sock
    assert set(joined) == {b"0", b"1"}, joined
    far.settimeout(0.5)
    with pytest.raises(TimeoutError):
        far.accept()
    clients[0].close()
    assert joined[b"0"].recv(1) == b"", "the given-up connection reached its far end"
    joined[b"0"].close()
    far.settimeout(10)
    third, _ = far.accept()
    clients[2].sendall(b"x")
    assert third.recv(1) == b"x"
    relay.close()
    for sock in (*clients, *joined.values(), third, far):
        sock.close()
