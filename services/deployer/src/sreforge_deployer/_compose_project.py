"""A run's Compose project through the `docker compose` CLI, and what is left of one.

The CLI rather than the Python SDK: Compose (networks, ordering, recreating one
service, `down -v --remove-orphans`) exists only in the CLI plugin, and the SDK
would add a dependency for the label queries alone. Every call has a deadline and
a failure names the command and its output's tail.
"""

from __future__ import annotations

import hashlib
import ipaddress
import subprocess
from pathlib import Path

from sreforge_deployer._errors import DeployerError

__all__ = ["PROJECT_LABEL", "ComposeProject", "bridge_gateway", "gateway_of", "project_name"]

PROJECT_LABEL = "com.docker.compose.project"
_TAIL = 3000


def project_name(run_id: str) -> str:
    """`sreforge-run-<12 hex>`: the run's project, derived from its id alone."""
    return f"sreforge-run-{hashlib.sha256(run_id.encode()).hexdigest()[:12]}"


def bridge_gateway(docker: str = "docker") -> str:
    """The address `host-gateway` maps to: the default bridge's gateway (docker0)."""
    template = "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}}{{end}}"
    return gateway_of(_docker([docker, "network", "inspect", "bridge", "--format", template], 30.0))


def gateway_of(ipam: str) -> str:
    """The gateway in `"<gateway> <subnet>"`; the subnet's first address when it is left out.

    The engine leaves `Gateway` out of the default bridge's IPAM config when it picked the
    subnet itself; the gateway is then the subnet's first address.
    """
    fields = ipam.split()
    if len(fields) == 2:
        return fields[0]
    try:
        return str(next(ipaddress.ip_network(fields[0], strict=False).hosts()))
    except (ValueError, IndexError, StopIteration) as error:
        reason = f"the Docker bridge network has no gateway address ({ipam!r})"
        raise DeployerError(reason) from error


class ComposeProject:
    """`docker compose -p <name> [-f <file>]`; the file is needed only to create things."""

    def __init__(self, name: str, file: Path | None = None, docker: str = "docker") -> None:
        self.name = name
        self.file = file
        self.docker = docker

    def up(self, services: tuple[str, ...] = (), *, recreate: bool = False) -> None:
        """Create and start `services` (all when empty); `recreate`: only those, afresh."""
        args = ["up", "-d", "--quiet-pull", "--no-build"]
        if recreate:
            args += ["--no-deps", "--force-recreate"]
        self._compose([*args, *services], 300.0, with_file=True)

    def stop(self, timeout_seconds: float) -> None:
        """Stop every container (TERM, KILL after `timeout_seconds`), keep them."""
        self._compose(["stop", "-t", str(max(0, round(timeout_seconds)))], 120.0)

    def down(self, timeout_seconds: float) -> None:
        """Remove containers, networks and volumes of the project (orphans too)."""
        grace = str(max(0, round(timeout_seconds)))
        self._compose(["down", "-v", "--remove-orphans", "-t", grace], 180.0)

    def running(self) -> set[str]:
        """The project's services whose container is running now."""
        return set(self._compose(["ps", "--status", "running", "--services"], 30.0).split())

    def logs(self, service: str, tail: int = 40) -> str:
        """The last `tail` lines a service logged ('' when there are none)."""
        try:
            return self._compose(["logs", "--no-color", "--tail", str(tail), service], 30.0)
        except DeployerError as error:
            return str(error)

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes still labelled with this project."""
        found = []
        label = f"label={PROJECT_LABEL}={self.name}"
        for kind, listing in (
            ("container", ["ps", "-a", "--format", "{{.Names}}"]),
            ("network", ["network", "ls", "--format", "{{.Name}}"]),
            ("volume", ["volume", "ls", "--format", "{{.Name}}"]),
        ):
            out = _docker([self.docker, *listing, "--filter", label], 30.0)
            found += [f"{kind} {name} of project {self.name}" for name in out.split()]
        return found

    def _compose(self, args: list[str], timeout: float, *, with_file: bool = False) -> str:
        command = [self.docker, "compose", "-p", self.name]
        if with_file:
            if self.file is None:
                raise DeployerError(f"project {self.name}: no compose file to create from")
            command += ["-f", str(self.file)]
        return _docker([*command, *args], timeout)


def _docker(command: list[str], timeout: float) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DeployerError(f"{' '.join(command[:4])} ...: {error}") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-_TAIL:].strip()
        raise DeployerError(f"{' '.join(command)} exited {done.returncode}: {tail}")
    return done.stdout
