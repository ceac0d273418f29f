"""Allowed loopback endpoints, and the in-process host side of an egress allowlist.

A confined command with a network namespace of its own reaches the host only
through relays: inside, `relay.py` listens on each allowed `127.0.0.1:<port>` and
joins each connection to `<host>-<port>.sock` in a folder bound from the host;
`HostEgress` serves those sockets from the calling process (the agent session's
runner), joining each to the real host:port. The deployer's confined service
gets the same relays from a launcher process instead (see `_confinement`).
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from sreforge_confine import _relay
from sreforge_confine._errors import ConfinementError
from sreforge_confine._relay import Relay, listen_unix, socket_name, tcp_connector

__all__ = [
    "RELAY_PYTHON",
    "RELAY_SCRIPT",
    "Endpoint",
    "HostEgress",
    "parse_endpoint",
    "parse_host_port",
]

RELAY_PYTHON = "/usr/bin/python3"
"""The interpreter that runs the relay (the bound `/usr`'s own, inside; the same outside)."""
RELAY_SCRIPT = Path(_relay.__file__)
"""The relay script (standard library only)."""
_RELAY_FILE = "relay.py"
_DEFAULT_PORTS = {"http": 80, "https": 443}


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
    """The loopback endpoint of an http(s) URL; ConfinementError naming `url` otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        host = parts.hostname or ""
        address = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError as error:
        raise ConfinementError(f"egress endpoint {url!r}: not a loopback URL ({error})") from error
    if parts.scheme not in _DEFAULT_PORTS or not address.is_loopback or port is None:
        raise ConfinementError(
            f"egress endpoint {url!r}: only http(s) on a loopback host is allowed"
        )
    return Endpoint(str(address), port)


def parse_host_port(text: str) -> Endpoint:
    """A loopback `HOST:PORT` (any TCP protocol); ConfinementError naming `text` otherwise."""
    host, _, digits = text.rpartition(":")
    try:
        address = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
        port = int(digits)
    except ValueError as error:
        raise ConfinementError(f"endpoint {text!r}: not a loopback HOST:PORT ({error})") from error
    if not address.is_loopback or not 0 < port < 65536:
        raise ConfinementError(f"endpoint {text!r}: only a loopback host and a port 1-65535")
    return Endpoint(str(address), port)


@dataclass
class HostEgress:
    """The host side of the allowlist: the relay script and one socket relay per endpoint."""

    folder: Path
    inside: Path = Path("/run/net")
    """Where the jail sees `folder`."""
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
            shutil.copyfile(RELAY_SCRIPT, script)
            script.chmod(0o444)
        except OSError as error:
            raise ConfinementError(f"egress relay in {self.folder}: {error}") from error

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` behind the relay: it listens on every opened endpoint, then runs `argv`."""
        script = self.inside / _RELAY_FILE
        specs = [endpoint.spec for endpoint in self.opened]
        return [RELAY_PYTHON, "-I", "-S", str(script), *specs, "--", *argv]

    def open(self, endpoints: Iterable[Endpoint]) -> None:
        """Listen on a socket for each endpoint not yet relayed (before the command starts)."""
        for endpoint in endpoints:
            if endpoint not in self._relays:
                relay = Relay(self._listen(endpoint), tcp_connector(endpoint.host, endpoint.port))
                relay.start()
                self._relays[endpoint] = relay

    def close(self) -> None:
        """Stop every relay and cut its connections; idempotent."""
        for relay in self._relays.values():
            relay.close()
        self._relays.clear()

    def _listen(self, endpoint: Endpoint) -> socket.socket:
        try:
            return listen_unix(str(self.folder / socket_name(endpoint.host, endpoint.port)))
        except OSError as error:
            raise ConfinementError(f"egress relay for {endpoint.spec}: {error}") from error
