"""Deterministic service-time and failure schedule for lookups."""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pacing:
    """Per-lookup latency and a 5xx share, both reproducible from the seed.

    With `busy_above_rate` > 0 the 5xx share applies only while the service is busy:
    more than that many lookups arrived in each of the last `busy_seconds` whole seconds.
    Sustained traffic is busy; a burst after a quiet second (a warm-up) is not.

    With `brownout_seconds` > 0, busy traffic also browns the service out: for that long
    each lookup takes `brownout_latency_seconds` (± jitter), and the next brownout comes
    `brownout_every_seconds` after this one began, if the traffic is busy then.
    """

    latency_seconds: float = 1.2
    jitter_seconds: float = 0.1
    error_rate: float = 0.0
    seed: int = 7
    busy_above_rate: float = 0.0
    busy_seconds: int = 5
    brownout_seconds: float = 0.0
    brownout_every_seconds: float = 0.0
    brownout_latency_seconds: float = 0.0


class LookupSchedule:
    """Decides, for the n-th lookup, how long it takes and whether it fails.

    Failures are spread evenly: lookup n fails when floor((n+1)*rate) > floor(n*rate),
    so any window of lookups sees the configured share, with no randomness (of the busy
    periods' lookups, when the share applies only while busy).
    """

    def __init__(self, pacing: Pacing, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0.0 <= pacing.error_rate <= 1.0:
            raise ValueError(f"error rate must be within [0, 1], got {pacing.error_rate}")
        if pacing.latency_seconds < 0 or pacing.jitter_seconds < 0:
            raise ValueError("latency and jitter must not be negative")
        self._pacing = pacing
        self._random = random.Random(pacing.seed)
        self._count = 0
        self._clock = clock
        self._per_second: deque[list[int]] = deque()  # [whole second, arrivals in it]
        self._brownout_began: float | None = None
        self._lock = threading.Lock()

    def next(self) -> tuple[float, bool]:
        """(delay in seconds, whether this lookup answers 503) for the next lookup."""
        with self._lock:
            n = self._count
            self._count += 1
            jitter = self._random.uniform(-self._pacing.jitter_seconds, self._pacing.jitter_seconds)
            busy = self._busy()
            browned_out = busy and self._browned_out()
        rate = self._pacing.error_rate
        fails = busy and int((n + 1) * rate) > int(n * rate)
        latency = (
            self._pacing.brownout_latency_seconds if browned_out else self._pacing.latency_seconds
        )
        delay = 0.0 if fails else max(0.0, latency + jitter)
        return delay, fails

    def _browned_out(self) -> bool:
        """Whether a busy lookup arriving now falls in a brownout (starting one if due)."""
        pacing = self._pacing
        if pacing.brownout_seconds <= 0:
            return False
        now = self._clock()
        began = self._brownout_began
        every = max(pacing.brownout_every_seconds, pacing.brownout_seconds)
        if began is None or now - began >= every:
            self._brownout_began = began = now
        return now - began < pacing.brownout_seconds

    def _busy(self) -> bool:
        """Count this arrival; whether each of the last whole seconds was above the rate."""
        threshold = self._pacing.busy_above_rate
        if threshold <= 0:
            return True
        second = int(self._clock())
        if self._per_second and self._per_second[-1][0] == second:
            self._per_second[-1][1] += 1
        else:
            self._per_second.append([second, 1])
        span = self._pacing.busy_seconds
        while self._per_second[0][0] < second - span:
            self._per_second.popleft()
        counts = {whole: count for whole, count in self._per_second}
        return all(counts.get(second - back, 0) > threshold for back in range(1, span + 1))
