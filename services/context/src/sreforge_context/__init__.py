"""The SREForge context service. Builds the neutral on-call page and agent_context once a run's alert fired."""

from sreforge_context._adapter import SERVICE

__all__ = ["SERVICE"]
