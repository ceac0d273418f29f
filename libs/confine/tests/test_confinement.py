"""The shared jail on real bubblewrap: what it shows, its two network policies, bad binds."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sreforge_confine import (
    Allowlist,
    Bubblewrap,
    ConfinementError,
    ConfinementUnavailable,
    Endpoint,
    Jail,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
pytestmark = pytest.mark.timeout(60)

# Run inside: which of the given paths exist, can `here` be written, which ports answer.
_LOOK = """
import json, os, socket, sys
paths, ports = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def dial(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return True
    except OSError:
        return False
try:
    open("written", "w").write("x")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"exists": {p: os.path.exists(p) for p in paths}, "wrote": wrote,
                  "dial": {str(p): dial(p) for p in ports}, "pid": os.getpid()}), flush=True)
"""


@pytest.fixture
def host_server() -> Iterator[int]:
    """An HTTP server on a host loopback port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"up")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _look(argv: list[str], cwd: Path) -> dict[str, object]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


@needs_bwrap
def test_no_network_shows_only_the_binds_and_reaches_no_host_port(
    tmp_path: Path, host_server: int
) -> None:
    """Under NoNetwork the command sees its binds (read-only ones unwritable), not the rest
    of the host, and no host port answers; it is not the host's PID namespace."""
    work, hidden, shown = tmp_path / "work", tmp_path / "hidden", tmp_path / "shown"
    for folder in (work, hidden, shown):
        folder.mkdir()
    paths = [str(shown), str(hidden), str(Path(__file__)), sys.prefix]
    look = [sys.executable, "-I", "-c", _LOOK, json.dumps(paths), json.dumps([host_server])]
    jail = Jail(
        tuple(look),
        cwd=work,
        read_only=(shown, Path(sys.prefix), Path(sys.base_prefix)),
        writable=(work,),
        die_with_parent=True,
    )
    found = _look(Bubblewrap().confine(jail).argv, work)
    expected = {str(shown): True, str(hidden): False, paths[2]: False, paths[3]: True}
    assert found["exists"] == expected
    assert found["wrote"] is True
    assert found["dial"] == {str(host_server): False}
    assert isinstance(found["pid"], int)
    assert found["pid"] < 10, "pid namespace of its own"
    readonly = Jail(
        tuple(look), cwd=shown, read_only=(shown, Path(sys.prefix), Path(sys.base_prefix))
    )
    assert _look(Bubblewrap().confine(readonly).argv, shown)["wrote"] is False


@needs_bwrap
def test_an_allowlist_reaches_only_its_endpoints_and_is_reached_on_its_port(
    tmp_path: Path, host_server: int
) -> None:
    """Outbound: the listed endpoint answers inside, an unlisted host port does not.
    Inbound: the host reaches the jail's server on the listed port through the relay, which
    holds that port for as long as the jail lives."""
    other = socket.create_server(("127.0.0.1", 0))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = (
        f"{_LOOK}\nimport http.server\n"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), "
        "http.server.SimpleHTTPRequestHandler).serve_forever()"
    )
    ports = json.dumps([host_server, other.getsockname()[1]])
    argv = (sys.executable, "-I", "-c", serve, "[]", ports)
    policy = Allowlist(tmp_path / "net", (Endpoint("127.0.0.1", host_server),), (port,))
    work = tmp_path / "work"
    work.mkdir()
    prefixes = (Path(sys.prefix), Path(sys.base_prefix))
    jail = Jail(argv, work, read_only=(work, *prefixes), network=policy)
    confined = Bubblewrap().confine(jail)
    assert confined.host_ports == (port,)
    for folder in confined.folders:
        folder.mkdir(parents=True)
    process = subprocess.Popen(
        confined.argv, cwd=work, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None
        inside = json.loads(process.stdout.readline())
        assert inside["dial"] == {str(host_server): True, str(other.getsockname()[1]): False}
        body = _get_with_deadline(port)
        assert b"Directory listing" in body
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=20)
        other.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _get_with_deadline(port: int) -> bytes:
    """GET / through the inbound relay, retried until the jail's server is up (20 s)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            if data.startswith(b"HTTP/1.0 200"):
                return data
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"nothing answered on 127.0.0.1:{port} through the relay")
        time.sleep(0.1)


def test_bad_binds_are_refused_naming_the_path(tmp_path: Path) -> None:
    """A relative bind, a missing one, one both read-only and writable, or a cwd outside
    every bind is refused."""
    cases = [
        ((), (), "not inside any of its binds"),
        ((Path("relative"),), (), "not an absolute path"),
        ((tmp_path / "missing",), (), "no such file"),
        ((tmp_path,), (tmp_path,), "both read-only and writable"),
    ]
    for read_only, writable, message in cases:
        jail = Jail(("true",), tmp_path, read_only=read_only, writable=writable)
        with pytest.raises(ConfinementError, match=message):
            Bubblewrap().confine(jail)


def test_without_bwrap_the_check_fails_closed_naming_it() -> None:
    """No bwrap binary: `check` raises ConfinementUnavailable saying bwrap."""
    with pytest.raises(ConfinementUnavailable, match=r"bwrap \('/nonexistent/bwrap'\) not found"):
        Bubblewrap("/nonexistent/bwrap").check()


_SYSCTL = "/proc/sys/vm/swappiness"
# Opening for writing is enough to tell, and writes nothing.
_OPEN_FOR_WRITE = f"import os; os.close(os.open({_SYSCTL!r}, os.O_WRONLY)); print('opened')"


@needs_bwrap
def test_the_machines_sysctls_are_read_only_inside(tmp_path: Path) -> None:
    """Root without capabilities can still write /proc/sys on the host (DAC only): inside
    the jail the same open fails with EROFS."""
    if not os.access(_SYSCTL, os.W_OK) or os.geteuid() != 0:
        pytest.skip("/proc/sys is not writable here, so there is nothing to take away")
    host = subprocess.run([sys.executable, "-c", _OPEN_FOR_WRITE], capture_output=True, text=True)
    assert host.stdout.strip() == "opened", host.stderr
    argv = (sys.executable, "-I", "-c", _OPEN_FOR_WRITE)
    jail = Jail(argv, tmp_path, read_only=(tmp_path, Path(sys.prefix), Path(sys.base_prefix)))
    inside = subprocess.run(
        Bubblewrap().confine(jail).argv, capture_output=True, text=True, timeout=30, check=False
    )
    assert inside.returncode != 0
    assert "Read-only file system" in inside.stderr
