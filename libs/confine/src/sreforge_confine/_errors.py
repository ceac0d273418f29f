"""The one exception tree of the confinement library.

```
ConfinementError
├── ConfinementUnavailable  the confinement cannot be set up here (bwrap missing or refused)
└── UntrustedFileRefused    a file in an agent's folder not read: a link, not regular, too big
    └── UntrustedFileMissing    ...because nothing is there
```
"""

from __future__ import annotations

__all__ = [
    "ConfinementError",
    "ConfinementUnavailable",
    "UntrustedFileMissing",
    "UntrustedFileRefused",
]


class ConfinementError(RuntimeError):
    """Base of every error the confinement raises: a bad bind, endpoint or policy."""


class ConfinementUnavailable(ConfinementError):
    """The confinement cannot run here; agent code must then not run at all."""


class UntrustedFileRefused(ConfinementError):
    """A file under an agent-controlled root was not read (or written): `path` and
    `reason` say which and why (a symbolic link, not a regular file, too big, ...)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class UntrustedFileMissing(UntrustedFileRefused):
    """Nothing is at the path (or a folder on the way is missing)."""
