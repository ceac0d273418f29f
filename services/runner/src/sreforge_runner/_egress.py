"""The confined agent's network: its own namespace, and an allowlist of loopback endpoints.

Under `host-sandboxed` the agent runs with `--unshare-net`: only its own
loopback exists. Each allowed endpoint (an `http(s)://127.0.0.1:<port>` URL: the
run's app API, Prometheus, Alertmanager, the model proxy) gets a relay on the
host, from the unix socket `<agent root>/net/<host>-<port>.sock` to host:port.
That folder is bound read-only at `/run/net`, where `relay.py` (the shared
`sreforge_confine` relay, run by the system `python3`) listens on the same
host:port inside the sandbox before the agent starts and joins each connection
to its socket. URLs in the page and env keep working; every other host port (the
bus, databases, other runs) and the internet do not exist for the agent. This
module only names the runner's errors: the relays are the shared library's.
"""

from __future__ import annotations

from collections.abc import Iterable

from sreforge_confine import RELAY_PYTHON, ConfinementError, Endpoint
from sreforge_confine import HostEgress as SharedEgress
from sreforge_confine import parse_endpoint as shared_parse_endpoint

from sreforge_runner._errors import SandboxError

__all__ = ["RELAY_PYTHON", "Endpoint", "HostEgress", "parse_endpoint"]


def parse_endpoint(url: str) -> Endpoint:
    """The loopback endpoint of an http(s) URL; SandboxError naming `url` for anything else."""
    try:
        return shared_parse_endpoint(url)
    except ConfinementError as error:
        raise SandboxError(str(error)) from error


class HostEgress(SharedEgress):
    """The shared host-side egress (seen at `/run/net`), failing with `SandboxError`."""

    def install(self) -> None:
        """Make the folder and write the relay script into it (read-only)."""
        try:
            super().install()
        except ConfinementError as error:
            raise SandboxError(str(error)) from error

    def open(self, endpoints: Iterable[Endpoint]) -> None:
        """Listen on a socket for each endpoint not yet relayed (before the agent starts)."""
        try:
            super().open(endpoints)
        except ConfinementError as error:
            raise SandboxError(str(error)) from error
