"""Port leases: distinct across stacks and processes, never a port someone holds."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sreforge_deployer import PortAllocator, PortUnavailableError
from sreforge_deployer._ports import ensure_free, wait_bindable


def test_leases_are_distinct_and_bindable(tmp_path: Path) -> None:
    """One stack's ports are all different and free to bind."""
    leases = PortAllocator(tmp_path).lease(7)
    ports = [lease.port for lease in leases]
    assert len(set(ports)) == 7
    for lease in leases:
        assert 20000 <= lease.port < 32000
        lease.release()


def test_a_leased_port_is_not_leased_again_until_released(tmp_path: Path) -> None:
    """Two allocators (two stacks) sharing a lock dir never hand out the same port."""
    held = PortAllocator(tmp_path, 25000, 25002).lease(2)
    with pytest.raises(PortUnavailableError, match="no 1 free loopback ports"):
        PortAllocator(tmp_path, 25000, 25002).lease(1)
    held[0].release()
    again = PortAllocator(tmp_path, 25000, 25002).lease(1)
    assert again[0].port == held[0].port
    again[0].release()
    held[1].release()
    assert not list(tmp_path.glob("*.lock")), "released leases leave no lock files"


def test_leases_do_not_collide_across_processes(tmp_path: Path) -> None:
    """Allocators in other processes see this process's leases (flock is machine-wide)."""
    mine = {lease.port for lease in PortAllocator(tmp_path, 26000, 26010).lease(8)}
    code = (
        "import sys; from pathlib import Path; from sreforge_deployer import PortAllocator;"
        f"ls = PortAllocator(Path({str(tmp_path)!r}), 26000, 26010).lease(2);"
        "print(' '.join(str(l.port) for l in ls))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    theirs = {int(p) for p in out.split()}
    assert len(theirs) == 2
    assert not theirs & mine


def test_a_port_in_use_by_someone_else_is_skipped(tmp_path: Path) -> None:
    """A port a foreign process listens on is never leased."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(PortUnavailableError):
            PortAllocator(tmp_path, port, port + 1).lease(1)


def test_ensure_free_names_component_and_port() -> None:
    """A port taken between lease and start fails naming the component and port."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(PortUnavailableError, match=rf"'prometheus': port 127.0.0.1:{port}"):
            ensure_free("prometheus", port)


def test_listening_ports_sees_a_listener_until_it_closes() -> None:
    """A port with a listener (IPv4 or IPv6) is reported; once closed, or merely bound, not."""
    from sreforge_deployer._ports import listening_ports

    listener, bound = socket.socket(), socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    bound.bind(("127.0.0.1", 0))
    ports = {listener.getsockname()[1], bound.getsockname()[1]}
    try:
        assert listening_ports(ports) == {listener.getsockname()[1]}
    finally:
        listener.close()
        bound.close()
    assert listening_ports(ports) == set()
    assert listening_ports(set()) == set()
    with socket.socket(socket.AF_INET6) as six:
        try:
            six.bind(("::1", 0))
        except OSError:
            return  # no IPv6 loopback on this machine
        six.listen()
        assert listening_ports({six.getsockname()[1]}) == {six.getsockname()[1]}


def test_wait_bindable_returns_once_the_holder_lets_go_or_at_the_deadline() -> None:
    """A restart waits for the stopped server's port: True once it is released (here by a
    listener closed from another thread), False when it never is within the deadline."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    assert not wait_bindable(port, 0.2)
    released = threading.Timer(0.3, squatter.close)
    released.start()
    try:
        assert wait_bindable(port, 10)
    finally:
        released.cancel()
        squatter.close()
