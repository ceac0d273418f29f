"""Counters, the sliding achieved-rate window and their Prometheus exposition."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge


class RateWindow:
    """Requests issued per second over the last `window_seconds`.

    Right after a start or resume the divisor is the time since then, so the rate
    is not under-reported while the window fills.
    """

    def __init__(self, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_seconds
        self._clock = clock
        self._issued: deque[float] = deque()
        self._active_since: float | None = None

    def activate(self) -> None:
        """Issuing (re)starts now."""
        self._active_since = self._clock()
        self._issued.clear()

    def deactivate(self) -> None:
        """Issuing stops; the rate reads 0 until the next activate()."""
        self._active_since = None
        self._issued.clear()

    def record(self) -> None:
        """One request was issued now."""
        self._issued.append(self._clock())

    def rate(self) -> float:
        """Issued requests per second over the window."""
        if self._active_since is None:
            return 0.0
        now = self._clock()
        while self._issued and self._issued[0] <= now - self._window:
            self._issued.popleft()
        span = min(self._window, now - self._active_since)
        return len(self._issued) / span if span > 0.5 else 0.0


class LoadMetrics:
    """The load generator's metrics on their own registry."""

    def __init__(self, target_rps: float) -> None:
        self.registry = CollectorRegistry()
        self.target = Gauge(
            "loadgen_target_rps", "Configured arrival rate.", registry=self.registry
        )
        self.target.set(target_rps)
        self.achieved = Gauge(
            "loadgen_achieved_rps",
            "Requests issued per second over the sliding window.",
            registry=self.registry,
        )
        self.requests = Counter(
            "loadgen_requests_total",
            "Completed requests by HTTP status, or 'error' for timeouts and transport errors.",
            ["status"],
            registry=self.registry,
        )
        self.inflight = Gauge(
            "loadgen_inflight", "Requests awaiting a response.", registry=self.registry
        )
        self.paused = Gauge("loadgen_paused", "1 while issuing is paused.", registry=self.registry)
