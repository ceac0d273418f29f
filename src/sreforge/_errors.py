"""The one exception tree of the `sreforge` CLI and engine."""

from __future__ import annotations

__all__ = ["EngineNotRunning", "SreforgeError"]


class SreforgeError(Exception):
    """An operator-facing failure; the CLI prints the message and exits 2."""


class EngineNotRunning(SreforgeError):
    """No engine to talk to: neither SREFORGE_NATS_URL nor a running `sreforge up`."""
