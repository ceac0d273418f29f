"""Counters, the sliding achieved-rate and latency windows and their Prometheus exposition.

The windows are written by the generator's event loop and read by the control server's
threads (a scrape must not wait for a starved loop), so each guards its deque with a lock.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; 0.3 is the service's p99 objective, 10 the default request timeout."""


class RateWindow:
    """Requests issued per second over the last `window_seconds` of the schedule.

    Right after a start or resume the divisor is the time since then, so the rate
    is not under-reported while the window fills. Arrivals are recorded at their
    scheduled instant and the window ends where the schedule has got to (`advance`):
    a generator whose loop lags (a starved host) but still sends every arrival, late,
    reads its true rate rather than its lag; arrivals dropped after a long stall, or
    shed, are missing from it and show.
    """

    def __init__(
        self,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        max_lag_seconds: float = 2.0,
    ) -> None:
        self._window = window_seconds
        self._clock = clock
        # Beyond this the generator restarts its schedule (dropping what it missed), so a
        # window never trails the clock by more: a loop stalled longer reads as short.
        self._max_lag = max_lag_seconds
        self._issued: deque[float] = deque()
        self._active_since: float | None = None
        self._progress: float | None = None
        self._lock = threading.Lock()

    def activate(self) -> None:
        """Issuing (re)starts now."""
        with self._lock:
            self._active_since = self._clock()
            self._progress = None
            self._issued.clear()

    def deactivate(self) -> None:
        """Issuing stops; the rate reads 0 until the next activate()."""
        with self._lock:
            self._active_since = None
            self._progress = None
            self._issued.clear()

    def record(self, at: float | None = None) -> None:
        """One request was issued, for its scheduled instant `at` (default: now)."""
        with self._lock:
            self._issued.append(self._clock() if at is None else at)

    def advance(self, to: float) -> None:
        """Every arrival scheduled before `to` has been handled (issued, shed or dropped)."""
        with self._lock:
            self._progress = to

    def rate(self) -> float:
        """Issued requests per second over the window, up to where the schedule has got."""
        with self._lock:
            if self._active_since is None:
                return 0.0
            now = self._clock()
            if self._progress is not None:
                now = max(self._active_since, now - self._max_lag, min(now, self._progress))
            while self._issued and self._issued[0] <= now - self._window:
                self._issued.popleft()
            issued = sum(1 for at in self._issued if at <= now)
            span = min(self._window, now - self._active_since)
            return issued / span if span > 0.5 else 0.0


class LatencyWindow:
    """Client-side latencies of the last `window_seconds`, for a sliding p99."""

    def __init__(self, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_seconds
        self._clock = clock
        self._samples: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        """One request completed now after `seconds`."""
        with self._lock:
            self._samples.append((self._clock(), seconds))

    def clear(self) -> None:
        """Forget every sample (a new issuing period starts)."""
        with self._lock:
            self._samples.clear()

    def quantile(self, q: float) -> float:
        """The nearest-rank q-quantile of the window's latencies, NaN when it is empty."""
        with self._lock:
            horizon = self._clock() - self._window
            while self._samples and self._samples[0][0] <= horizon:
                self._samples.popleft()
            latencies = [seconds for _, seconds in self._samples]
        if not latencies:
            return math.nan
        ordered = sorted(latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class LoadMetrics:
    """The load generator's metrics on their own registry."""

    def __init__(self, target_rps: float, latency: LatencyWindow | None = None) -> None:
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
        self.shed = Counter(
            "loadgen_shed_total",
            "Arrivals not sent because the in-flight cap was reached (each also counted as a "
            "failed answer; never queued, never in loadgen_requests_total).",
            registry=self.registry,
        )
        self.client_latency = Histogram(
            "loadgen_client_latency_seconds",
            "Client-side latency of completed requests of the current issuing period "
            "(timeouts and transport errors at their elapsed time; not warm-up).",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.latency = latency or LatencyWindow(10.0)
        client_p99 = Gauge(
            "loadgen_client_p99_seconds",
            "p99 of client-side latency over the sliding window (NaN: no request).",
            registry=self.registry,
        )
        client_p99.set_function(lambda: self.latency.quantile(0.99))

    def observe_latency(self, seconds: float) -> None:
        """One current-period request completed after `seconds`."""
        self.client_latency.observe(seconds)
        self.latency.record(seconds)
