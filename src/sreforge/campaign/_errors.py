"""The campaign's errors: operator-facing, part of the CLI's one exception tree."""

from __future__ import annotations

from sreforge._errors import SreforgeError

__all__ = ["CampaignError"]


class CampaignError(SreforgeError):
    """A campaign file, id or folder the command cannot use; the message says which field."""
