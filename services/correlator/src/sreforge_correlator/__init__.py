"""The SREForge correlator service. Owns run state in KV: accepts `run.start`, joins triggers to runs, enforces deadlines."""

from sreforge_correlator._adapter import SERVICE

__all__ = ["SERVICE"]
