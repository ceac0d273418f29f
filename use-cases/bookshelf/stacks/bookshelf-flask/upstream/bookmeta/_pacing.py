"""Deterministic service-time and failure schedule for lookups."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pacing:
    """Per-lookup latency and a 5xx share, both reproducible from the seed."""

    latency_seconds: float = 1.2
    jitter_seconds: float = 0.1
    error_rate: float = 0.0
    seed: int = 7


class LookupSchedule:
    """Decides, for the n-th lookup, how long it takes and whether it fails.

    Failures are spread evenly: lookup n fails when floor((n+1)*rate) > floor(n*rate),
    so any window of lookups sees the configured share, with no randomness.
    """

    def __init__(self, pacing: Pacing) -> None:
        if not 0.0 <= pacing.error_rate <= 1.0:
            raise ValueError(f"error rate must be within [0, 1], got {pacing.error_rate}")
        if pacing.latency_seconds < 0 or pacing.jitter_seconds < 0:
            raise ValueError("latency and jitter must not be negative")
        self._pacing = pacing
        self._random = random.Random(pacing.seed)
        self._count = 0
        self._lock = threading.Lock()

    def next(self) -> tuple[float, bool]:
        """(delay in seconds, whether this lookup answers 503) for the next lookup."""
        with self._lock:
            n = self._count
            self._count += 1
            jitter = self._random.uniform(-self._pacing.jitter_seconds, self._pacing.jitter_seconds)
        rate = self._pacing.error_rate
        fails = int((n + 1) * rate) > int(n * rate)
        delay = 0.0 if fails else max(0.0, self._pacing.latency_seconds + jitter)
        return delay, fails
