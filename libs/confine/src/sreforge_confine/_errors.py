"""The one exception tree of the confinement library.

```
ConfinementError
└── ConfinementUnavailable  the confinement cannot be set up here (bwrap missing or refused)
```
"""

from __future__ import annotations

__all__ = ["ConfinementError", "ConfinementUnavailable"]


class ConfinementError(RuntimeError):
    """Base of every error the confinement raises: a bad bind, endpoint or policy."""


class ConfinementUnavailable(ConfinementError):
    """The confinement cannot run here; agent code must then not run at all."""
