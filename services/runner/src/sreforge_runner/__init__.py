"""The SREForge runner service. Drives the agent through the gateway and reports its submission."""

from sreforge_runner._adapter import SERVICE

__all__ = ["SERVICE"]
