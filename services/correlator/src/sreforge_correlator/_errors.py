"""The one exception tree of the correlator."""

from __future__ import annotations

__all__ = ["CorrelatorError", "RunStateError", "StartRejected"]


class CorrelatorError(Exception):
    """Something the correlator could not do; the message names the run, key or field."""


class StartRejected(CorrelatorError):
    """A `run.start` was refused; the message names the field at fault (`agent: ...`)."""


class RunStateError(CorrelatorError):
    """Run state in KV could not be read or kept changing under us (CAS never settled)."""
