"""Confinement of agent-controlled code: one interface, a bubblewrap implementation.

The agent's tree runs in three places (the agent session, the CI gate, the
redeployed service); each runs it through this library. `Bubblewrap.confine(Jail)`
gives the command line; `bwrap_argv` and `HostEgress` are the parts the runner's
agent sandbox builds its own layout from; `relay.py` (`RELAY_SCRIPT`) is the
standard-library relay both sides of a network namespace run. Harness processes
that read (or write) a file inside a folder the agent controls (its workspace, its
`.git`, its HOME) go through `read_untrusted`, `open_untrusted`, `is_untrusted_file`
and `write_untrusted`, which follow no symbolic link and read nothing but a regular
file, capped; a refusal is an `UntrustedFileRefused` naming the path and why.
"""

from sreforge_confine._bwrap import Mount, bwrap_argv, probe_bwrap
from sreforge_confine._confinement import (
    Allowlist,
    Bubblewrap,
    Confined,
    Confinement,
    Jail,
    NetworkPolicy,
    NoNetwork,
)
from sreforge_confine._egress import (
    RELAY_PYTHON,
    RELAY_SCRIPT,
    Endpoint,
    HostEgress,
    parse_endpoint,
    parse_host_port,
)
from sreforge_confine._errors import (
    ConfinementError,
    ConfinementUnavailable,
    UntrustedFileMissing,
    UntrustedFileRefused,
)
from sreforge_confine._relay import socket_name
from sreforge_confine._untrusted import (
    is_untrusted_file,
    open_untrusted,
    read_untrusted,
    write_untrusted,
)

__all__ = [
    "RELAY_PYTHON",
    "RELAY_SCRIPT",
    "Allowlist",
    "Bubblewrap",
    "Confined",
    "Confinement",
    "ConfinementError",
    "ConfinementUnavailable",
    "Endpoint",
    "HostEgress",
    "Jail",
    "Mount",
    "NetworkPolicy",
    "NoNetwork",
    "UntrustedFileMissing",
    "UntrustedFileRefused",
    "bwrap_argv",
    "is_untrusted_file",
    "open_untrusted",
    "parse_endpoint",
    "parse_host_port",
    "probe_bwrap",
    "read_untrusted",
    "socket_name",
    "write_untrusted",
]
