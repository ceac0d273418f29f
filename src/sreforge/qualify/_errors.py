"""Qualification's errors: operator-facing, part of the CLI's one exception tree."""

from __future__ import annotations

from sreforge._errors import SreforgeError

__all__ = ["QualifyError"]


class QualifyError(SreforgeError):
    """A scenario, flag or cheat catalog qualify cannot use; the message names the field."""
