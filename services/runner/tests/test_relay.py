"""The loopback relay: the script run inside the sandbox, and the host's socket relays."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sreforge_confine import _relay, socket_name
from sreforge_runner._egress import HostEgress, parse_endpoint

TRAP = "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done"
"""A command that says `ready` once its SIGTERM trap is set, and exits 7 on SIGTERM."""


def _relay_process(*command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", _relay.__file__, "--", *command],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_the_relay_passes_signals_to_the_command_and_returns_its_status() -> None:
    """SIGTERM to the relay reaches the command (its trap runs); the relay exits with the
    command's status, 128 + N for a command killed by signal N, 127 for a missing one."""
    relay = _relay_process("/bin/sh", "-c", TRAP)
    assert relay.stdout is not None
    assert relay.stdout.readline() == "ready\n"
    relay.send_signal(signal.SIGTERM)
    assert relay.wait(timeout=20) == 7
    assert relay.stdout.read() == "got-term\n"
    killed = _relay_process("/bin/sh", "-c", "kill -KILL $$")
    assert killed.wait(timeout=20) == 128 + signal.SIGKILL
    missing = _relay_process("/nonexistent/agent")
    assert missing.wait(timeout=20) == 127


def test_the_relay_forwards_signals_its_starter_had_blocked() -> None:
    """Started with SIGTERM blocked (a mask its parent's thread passed on), the relay
    still forwards it to the command, and the command does not inherit the block."""
    relay = subprocess.Popen(
        [sys.executable, "-I", "-S", _relay.__file__, "--", "/bin/sh", "-c", TRAP],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}),
    )
    assert relay.stdout is not None
    assert relay.stdout.readline() == "ready\n"
    relay.send_signal(signal.SIGTERM)
    assert relay.wait(timeout=20) == 7
    assert relay.stdout.read() == "got-term\n"


def test_the_relay_refuses_to_run_without_a_command_or_with_a_bad_endpoint() -> None:
    """No `--`/command is a usage error (2); an endpoint it cannot listen on is 125, and
    the command never starts."""
    usage = subprocess.run([sys.executable, _relay.__file__], capture_output=True, check=False)
    assert usage.returncode == 2
    bad = subprocess.run(
        [sys.executable, _relay.__file__, "127.0.0.1:notaport", "--", "echo", "ran"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 125
    assert "ran" not in bad.stdout


def test_host_relays_join_their_socket_to_the_port_until_closed(tmp_path: Path) -> None:
    """The host side relays `<folder>/<host>-<port>.sock` to host:port both ways, even in a
    folder whose path is longer than a unix socket address; close cuts the live connection
    and refuses new ones."""
    host_listener = socket.create_server(("127.0.0.1", 0))
    port = host_listener.getsockname()[1]
    egress = HostEgress(tmp_path / ("deep-" * 20) / "net")
    egress.install()
    egress.open([parse_endpoint(f"http://127.0.0.1:{port}")])
    path = egress.folder / socket_name("127.0.0.1", port)
    assert len(str(path)) > 108
    client = _dial_unix(path)
    host_listener.settimeout(10)
    far_end, _ = host_listener.accept()
    far_end.settimeout(10)
    client.sendall(b"ping")
    assert _recv_exactly(far_end, 4) == b"ping"
    far_end.sendall(b"pong")
    assert _recv_exactly(client, 4) == b"pong"
    egress.close()
    assert _recv_to_eof(far_end) == b""
    assert _recv_to_eof(client) == b""
    with pytest.raises(ConnectionRefusedError):
        _dial_unix(path)
    for sock in (client, far_end, host_listener):
        sock.close()


def _dial_unix(path: Path) -> socket.socket:
    """Connect to a unix socket whatever its path's length (through its folder's fd)."""
    folder = os.open(path.parent, os.O_PATH)
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    try:
        sock.connect(f"/proc/self/fd/{folder}/{path.name}")
    except OSError:
        sock.close()
        raise
    finally:
        os.close(folder)
    return sock


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := sock.recv(size - len(data))):
        data += chunk
    return data


def _recv_to_eof(sock: socket.socket) -> bytes:
    """Everything until the peer closes (the socket's timeout bounds the wait)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data
