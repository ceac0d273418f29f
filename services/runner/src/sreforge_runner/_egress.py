"""The confined agent's network: its own namespace, and an allowlist of loopback endpoints.

Under `host-sandboxed` the agent runs with `--unshare-net`: only its own
loopback exists. Each allowed endpoint (an `http(s)://127.0.0.1:<port>` URL: the
run's app API, Prometheus, Alertmanager, the model proxy) gets a relay on the
host, from the unix socket `<agent root>/net/<host>-<port>.sock` to host:port.
That folder is bound read-only at `/run/net`, where `relay.py` (`_relay`, run by
the system `python3`) listens on the same host:port inside the sandbox before
the agent starts and joins each connection to its socket. URLs in the page and
env keep working; every other host port (the bus, databases, other runs) and the
internet do not exist for the agent.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from sreforge_runner import _relay
from sreforge_runner._bwrap import SANDBOX_NET
from sreforge_runner._errors import SandboxError
from sreforge_runner._relay import Relay, socket_name

__all__ = ["RELAY_PYTHON", "Endpoint", "HostEgress", "parse_endpoint"]

RELAY_PYTHON = "/usr/bin/python3"
"""The interpreter that runs the relay inside the sandbox (the bound `/usr`'s own)."""
_RELAY_FILE = "relay.py"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_BACKLOG = 128


@dataclass(frozen=True, order=True)
class Endpoint:
    """One allowed TCP endpoint on the host's loopback."""

    host: str
    port: int

    @property
    def spec(self) -> str:
        """`host:port`, as the relay script takes it."""
        return f"{self.host}:{self.port}"


def parse_endpoint(url: str) -> Endpoint:
    """The loopback endpoint of an http(s) URL; SandboxError naming `url` for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        host = parts.hostname or ""
        address = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError as error:
        raise SandboxError(f"egress endpoint {url!r}: not a loopback URL ({error})") from error
    if parts.scheme not in _DEFAULT_PORTS or not address.is_loopback or port is None:
        raise SandboxError(f"egress endpoint {url!r}: only http(s) on a loopback host is allowed")
    return Endpoint(str(address), port)


@dataclass
class HostEgress:
    """The host side of the allowlist: the relay script and one socket relay per endpoint."""

    folder: Path
    _relays: dict[Endpoint, Relay] = field(default_factory=dict, init=False, repr=False)

    @property
    def opened(self) -> tuple[Endpoint, ...]:
        """The endpoints relayed now, in order."""
        return tuple(sorted(self._relays))

    def install(self) -> None:
        """Make the folder and write the relay script into it (read-only)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            script = self.folder / _RELAY_FILE
            script.unlink(missing_ok=True)
            shutil.copyfile(Path(_relay.__file__), script)
            script.chmod(0o444)
        except OSError as error:
            raise SandboxError(f"egress relay in {self.folder}: {error}") from error

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` behind the relay: it listens on every opened endpoint, then runs `argv`."""
        script = SANDBOX_NET / _RELAY_FILE
        specs = [endpoint.spec for endpoint in self.opened]
        return [RELAY_PYTHON, "-I", "-S", str(script), *specs, "--", *argv]

    def open(self, endpoints: Iterable[Endpoint]) -> None:
        """Listen on a socket for each endpoint not yet relayed (before the agent starts)."""
        for endpoint in endpoints:
            if endpoint not in self._relays:
                relay = Relay(self._listen(endpoint), _tcp_connector(endpoint))
                relay.start()
                self._relays[endpoint] = relay

    def close(self) -> None:
        """Stop every relay and cut its connections; idempotent."""
        for relay in self._relays.values():
            relay.close()
        self._relays.clear()

    def _listen(self, endpoint: Endpoint) -> socket.socket:
        name = socket_name(endpoint.host, endpoint.port)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bound through the folder's fd: a run dir's path can exceed sun_path's 108 bytes.
        folder = os.open(self.folder, os.O_PATH | os.O_DIRECTORY)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder)
            listener.bind(f"/proc/self/fd/{folder}/{name}")
            listener.listen(_BACKLOG)
        except OSError as error:
            listener.close()
            raise SandboxError(f"egress relay for {endpoint.spec}: {error}") from error
        finally:
            os.close(folder)
        return listener


def _tcp_connector(endpoint: Endpoint) -> _relay.Connector:
    def connect() -> socket.socket:
        sock = socket.create_connection((endpoint.host, endpoint.port), timeout=10.0)
        sock.settimeout(None)
        return sock

    return connect
