"""The one exception tree of the deployer package.

```
DeployerError
├── StackSpecError          a stack.toml / scenario file is missing or malformed
├── BinaryMissingError      a component's executable is not on PATH
├── PortUnavailableError    no free port, or a component's port is taken by someone else
├── ComponentStartError     a component crashed or missed its health deadline
├── ConfinementFailed       agent code cannot be confined here (bwrap missing, a bad bind)
├── WorkspaceError          building the run's git workspace or delivering a fault failed
├── LoadControlError        the load generator refused a pause/resume
├── TeardownIncompleteError something of the run survived teardown
└── TopologyFault           anything else a topology's call raised (the cause chained)
```
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BinaryMissingError",
    "ComponentStartError",
    "ConfinementFailed",
    "DeployerError",
    "LoadControlError",
    "PortUnavailableError",
    "StackSpecError",
    "TeardownIncompleteError",
    "TopologyFault",
    "WorkspaceError",
]


class DeployerError(RuntimeError):
    """Base of every error the deployer raises."""


class StackSpecError(DeployerError):
    """A stack or scenario description is missing or malformed; the message names the file."""

    def __init__(self, message: str, *, source: Path | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source


class BinaryMissingError(DeployerError):
    """A component's executable could not be found on PATH."""

    def __init__(self, component: str, binary: str) -> None:
        super().__init__(
            f"component {component!r}: executable {binary!r} not found on PATH "
            "(install it, e.g. `apt-get install prometheus prometheus-alertmanager`, "
            "or point the setting at it)"
        )
        self.component = component
        self.binary = binary


class PortUnavailableError(DeployerError):
    """No port could be leased, or a leased port was taken before the component bound it."""

    def __init__(self, message: str, *, component: str = "", port: int | None = None) -> None:
        super().__init__(message)
        self.component = component
        self.port = port


class ComponentStartError(DeployerError):
    """A component exited or missed its health deadline; carries its log path and tail."""

    def __init__(self, component: str, reason: str, *, log_path: Path, log_tail: str) -> None:
        tail = log_tail.strip() or "(log is empty)"
        super().__init__(
            f"component {component!r} failed to start: {reason}\n"
            f"log file: {log_path}\n--- last lines of the log ---\n{tail}"
        )
        self.component = component
        self.reason = reason
        self.log_path = log_path
        self.log_tail = log_tail


class ConfinementFailed(DeployerError):
    """Agent-controlled code could not be confined, so it was not run at all."""


class WorkspaceError(DeployerError):
    """Building the run workspace, delivering a fault or applying a change failed."""


class LoadControlError(DeployerError):
    """The load generator did not accept a pause or resume."""


class StackLostError(DeployerError):
    """A run's stack cannot be adopted by this process (its state file is gone, a
    component died, a port's lease is held elsewhere, or the topology cannot adopt):
    the interrupted stage cannot be repeated on it, so the run ends `error`."""


class TeardownIncompleteError(DeployerError):
    """Teardown finished but something of the run is still there; lists what remains."""

    def __init__(self, run_id: str, leftovers: list[str]) -> None:
        listing = "\n".join(f"  - {item}" for item in leftovers)
        super().__init__(f"run {run_id}: teardown left things behind:\n{listing}")
        self.run_id = run_id
        self.leftovers = leftovers


class TopologyFault(DeployerError):
    """Something a topology called failed in a way no other error names (an OSError, a
    library's own error); the cause is chained, and the message is the cause's."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause
