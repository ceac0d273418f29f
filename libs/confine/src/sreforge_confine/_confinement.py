"""The confinement interface, its network policies, and its bubblewrap implementation.

A caller describes a `Jail` (the command, its cwd, what it may read, what it may
write, its network) and a `Confinement` turns it into the `Confined` command line
to start on the host. Paths keep their host names inside, so argv, env and cwd
need no translation. The local topology's implementation is `Bubblewrap`; another
topology (containers) gives the same guarantees behind the same two methods.

Network policies: `NoNetwork` (only the jail's own loopback) and `Allowlist`
(outbound to the listed loopback endpoints, inbound from the host on the listed
loopback ports, nothing else). Under `Allowlist` the confined command line starts
with a host-side relay (`relay.py --linger`): it holds the inbound ports on the
host's 127.0.0.1 and the outbound sockets, starts bubblewrap, and lives until
every process of the jail has exited, so the relays are part of the command's own
process group and lifecycle; inside, a second relay listens on the outbound
endpoints and dials the jail's own inbound ports.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sreforge_confine._bwrap import Mount, bwrap_argv, probe_bwrap
from sreforge_confine._egress import RELAY_PYTHON, RELAY_SCRIPT, Endpoint
from sreforge_confine._errors import ConfinementError, ConfinementUnavailable
from sreforge_confine._relay import socket_name

__all__ = [
    "Allowlist",
    "Bubblewrap",
    "Confined",
    "Confinement",
    "Jail",
    "NetworkPolicy",
    "NoNetwork",
]

_INSIDE_SCRIPT = Path("/run/relay.py")
_INSIDE_OUT = Path("/run/net")
_INSIDE_IN = Path("/run/net-in")
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class NoNetwork:
    """No network but the jail's own loopback: nothing of the host is reachable."""

    @property
    def label(self) -> str:
        """How a record names this policy."""
        return "none"


@dataclass(frozen=True)
class Allowlist:
    """Reach only `outbound` endpoints; be reached from the host only on `inbound` ports.

    `relay_dir` is a host folder of the run's for the relays' unix sockets (made
    before start; the caller removes it with the run)."""

    relay_dir: Path
    outbound: tuple[Endpoint, ...] = ()
    inbound: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """How a record names this policy."""
        return "allowlist"


NetworkPolicy = NoNetwork | Allowlist


@dataclass(frozen=True)
class Jail:
    """What a confined command may see and do."""

    argv: tuple[str, ...]
    cwd: Path
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    network: NetworkPolicy = field(default_factory=NoNetwork)
    die_with_parent: bool = False
    """Tie the jail to the process that starts it (CI); a stack component outlives a
    deployer restart and is stopped by its process group instead."""


@dataclass(frozen=True)
class Confined:
    """The command line to start on the host, and what it needs around it."""

    argv: list[str]
    folders: tuple[Path, ...] = ()
    """Host folders to make (mode 0700) before starting it."""
    host_ports: tuple[int, ...] = ()
    """Loopback ports its own leader process listens on for the host (inbound relays)."""
    confinement: str = "bwrap"


class Confinement(Protocol):
    """Turns a jail into a command line; refuses when it cannot confine here."""

    name: str

    def check(self) -> None:
        """Raise `ConfinementUnavailable` (naming the tool) unless jails can be made here."""
        ...

    def confine(self, jail: Jail) -> Confined:
        """The confined command line for `jail`; `ConfinementError` naming a bad path."""
        ...


@dataclass
class Bubblewrap:
    """The local topology's confinement: bubblewrap namespaces and loopback relays."""

    bwrap: str = "bwrap"
    relay_python: str = RELAY_PYTHON
    name: str = "bwrap"
    _checked: bool = field(default=False, init=False, repr=False)

    def check(self) -> None:
        """Probe once that bwrap makes a jail with its own network namespace."""
        if self._checked:
            return
        found = shutil.which(self.bwrap)
        if found is None:
            raise ConfinementUnavailable(
                f"bwrap ({self.bwrap!r}) not found: agent code is never run unconfined; "
                "install bubblewrap (apt-get install bubblewrap)"
            )
        prefix = bwrap_argv(
            found, (), Path("/"), unshare_net=True, die_with_parent=True, new_session=False
        )
        why = probe_bwrap(prefix)
        if why is not None:
            raise ConfinementUnavailable(f"bwrap cannot make a jail here: {why}")
        if not Path(self.relay_python).is_file():
            raise ConfinementUnavailable(f"the relay's interpreter {self.relay_python} is missing")
        self._checked = True

    def confine(self, jail: Jail) -> Confined:
        """bwrap around `jail.argv`; under an allowlist, the relays around both sides."""
        if not jail.argv:
            raise ConfinementError("jail: empty argv")
        mounts = _mounts(jail)
        if not any(jail.cwd.is_relative_to(mount.target) for mount in mounts):
            raise ConfinementError(f"jail cwd {jail.cwd}: not inside any of its binds")
        policy = jail.network
        if isinstance(policy, NoNetwork):
            prefix = self._prefix(mounts, jail)
            return Confined([*prefix, *jail.argv])
        out_dir, in_dir = policy.relay_dir / "out", policy.relay_dir / "in"
        mounts += [
            Mount(out_dir, _INSIDE_OUT),
            Mount(in_dir, _INSIDE_IN, writable=True),
            Mount(RELAY_SCRIPT, _INSIDE_SCRIPT),
        ]
        inside_specs, host_specs = [], []
        for endpoint in sorted(set(policy.outbound)):
            name = socket_name(endpoint.host, endpoint.port)
            inside_specs.append(f"tcp:{endpoint.spec}=unix:{_INSIDE_OUT / name}")
            host_specs.append(f"unix:{out_dir / name}=tcp:{endpoint.spec}")
        for port in sorted(set(policy.inbound)):
            name = socket_name(_LOOPBACK, port)
            inside_specs.append(f"unix:{_INSIDE_IN / name}=tcp:{_LOOPBACK}:{port}")
            host_specs.append(f"tcp:{_LOOPBACK}:{port}=unix:{in_dir / name}")
        inside = [self.relay_python, "-I", "-S", str(_INSIDE_SCRIPT), *inside_specs, "--"]
        host = [self.relay_python, "-I", "-S", str(RELAY_SCRIPT), "--linger", *host_specs, "--"]
        argv = [*host, *self._prefix(mounts, jail), *inside, *jail.argv]
        return Confined(argv, folders=(out_dir, in_dir), host_ports=tuple(sorted(policy.inbound)))

    def _prefix(self, mounts: list[Mount], jail: Jail) -> list[str]:
        return bwrap_argv(
            self.bwrap,
            mounts,
            jail.cwd,
            unshare_net=True,
            die_with_parent=jail.die_with_parent,
            new_session=False,
        )


def _mounts(jail: Jail) -> list[Mount]:
    """The jail's binds at their own paths, parents before children; bad ones named."""
    chosen: dict[Path, Mount] = {}
    for path, writable in [(p, False) for p in jail.read_only] + [(p, True) for p in jail.writable]:
        if not path.is_absolute():
            raise ConfinementError(f"jail bind {path}: not an absolute path")
        if not path.exists():
            raise ConfinementError(f"jail bind {path}: no such file or folder")
        if path in chosen and chosen[path].writable != writable:
            raise ConfinementError(f"jail bind {path}: both read-only and writable")
        chosen[path] = Mount(path, writable=writable)
    return sorted(chosen.values(), key=lambda mount: (len(mount.target.parts), str(mount.target)))
