"""The teardown's port check: a socket closing a moment after its process reads as gone is
no leftover; one still listening after the grace is."""

from __future__ import annotations

import socket
import threading

import pytest
from sreforge_deployer.local._teardown import leftovers


def listener() -> socket.socket:
    """A socket listening on a free loopback port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


@pytest.mark.timeout(30)
def test_a_port_closed_within_the_grace_is_no_leftover() -> None:
    """A listener closed 0.5 s into the check (a Go server's last threads exiting) is not
    reported; the check waited for it rather than reading the port once."""
    server = listener()
    port = server.getsockname()[1]
    closer = threading.Timer(0.5, server.close)
    closer.start()
    try:
        assert leftovers({}, {"alertmanager": port}, None) == []
    finally:
        closer.cancel()
        server.close()


@pytest.mark.timeout(30)
def test_a_port_still_listening_after_the_grace_is_a_leftover() -> None:
    """A listener that stays is reported by port and component."""
    with listener() as server:
        port = server.getsockname()[1]
        found = leftovers({}, {"alertmanager": port}, None)
    assert found == [f"port 127.0.0.1:{port} (alertmanager) still listening"]
