"""The one exception tree of the contracts package."""

from __future__ import annotations

__all__ = ["ContractError"]


class ContractError(ValueError):
    """Input did not match a contract; the message names the field or file at fault."""
