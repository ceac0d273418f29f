"""The open-model generator: arrivals follow the clock, never the responses.

In flight is capped (`max_inflight`): an arrival that finds the cap reached is shed, not
queued, so the schedule never waits for a response. A shed arrival is a user who got no
answer: it counts as a `failed` answer and in `loadgen_shed_total`, but not as issued
(`loadgen_achieved_rps` falls), not in `loadgen_requests_total` (the target never saw it)
and not in the client latency (it has none). The default cap, 1.25 x rate x timeout, is
above what a punctual client can hold (every request ends within the timeout), so it
only engages when the generator itself falls behind (a starved event loop) and its work
would otherwise grow without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass

import httpx

from ._checks import Request, ResponseChecks, Result
from ._profiles import Profile
from ._stats import LatencyWindow, LoadMetrics, RateWindow

log = logging.getLogger("loadgen")
# After a stall longer than this (host suspended, debugger), restart the schedule
# instead of bursting every missed arrival at once.
_MAX_LAG_SECONDS = 2.0
_STOP_GRACE_SECONDS = 2.0
"""How long stop() waits for cancelled requests and the connection pool to wind down."""


def default_max_inflight(rate: float, timeout_seconds: float) -> int:
    """The in-flight cap: 1.25 x what `rate` holds in flight when every request times out."""
    return max(16, math.ceil(1.25 * rate * timeout_seconds))


@dataclass(frozen=True, slots=True)
class WarmupReport:
    """Outcome of one pass over a profile's working set."""

    requests: int
    ok: int
    seconds: float


class LoadGenerator:
    """Issues `rate` requests per second against `target` until stopped."""

    def __init__(
        self,
        target: str,
        rate: float,
        profile: Profile,
        *,
        timeout_seconds: float = 10.0,
        window_seconds: float = 10.0,
        paused: bool = False,
        max_inflight: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if max_inflight is not None and max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, got {max_inflight}")
        self.rate = rate
        self.max_inflight = max_inflight or default_max_inflight(rate, timeout_seconds)
        self.profile = profile
        self.metrics = LoadMetrics(rate, LatencyWindow(window_seconds))
        self.window = RateWindow(window_seconds, max_lag_seconds=_MAX_LAG_SECONDS)
        self.metrics.achieved.set_function(self.window.rate)
        self.metrics.inflight.set_function(lambda: len(self._inflight))
        self.checks = ResponseChecks(self.metrics.registry, window_seconds, profile.check)
        # Bumped on pause: answers to requests issued before it are the old build's.
        self._period = 0
        self._client = httpx.AsyncClient(
            base_url=target,
            timeout=timeout_seconds,
            # The cap bounds the arrivals; the warm-up's set may come on top of them.
            limits=httpx.Limits(
                max_connections=self.max_inflight + len(profile.working_set),
                max_keepalive_connections=min(64, self.max_inflight),
            ),
            transport=transport,
        )
        self._inflight: set[asyncio.Task[None]] = set()
        self._running = asyncio.Event()
        self._stopped = False
        self._sequence = 0
        if not paused:
            self.resume()
        else:
            self.metrics.paused.set(1)

    @property
    def paused(self) -> bool:
        """Whether issuing is paused."""
        return not self._running.is_set()

    def pause(self) -> None:
        """Stop issuing new requests (those in flight complete)."""
        self._running.clear()
        self.window.deactivate()
        self._period += 1
        self.checks.clear()
        self.metrics.latency.clear()
        self.metrics.paused.set(1)

    def resume(self) -> None:
        """Issue again at the configured rate, starting now."""
        if self._running.is_set():
            return
        self.window.activate()
        self._running.set()
        self.metrics.paused.set(0)

    async def run(self) -> None:
        """The arrival loop; returns after stop()."""
        while not self._stopped:
            await self._running.wait()
            await self._issue_while_running()

    async def _issue_while_running(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while self._running.is_set() and not self._stopped:
            lag = time.monotonic() - next_at
            if lag < 0:
                await asyncio.sleep(-lag)
                continue
            if lag > _MAX_LAG_SECONDS:
                log.warning("schedule fell %.1fs behind; restarting it", lag)
                next_at = time.monotonic()
            self._launch(self.profile.request(self._sequence), at=next_at)
            self._sequence += 1
            next_at += interval
            self.window.advance(next_at)

    def _launch(self, request: Request, at: float | None = None) -> None:
        """Send `request` (scheduled for `at`, default now), or shed it at the cap."""
        if len(self._inflight) >= self.max_inflight:
            self.metrics.shed.inc()
            self.checks.record("failed")
            return
        self.window.record(at)
        # The period is the launch's: a task first runs a loop turn later, maybe after a
        # pause, and its answer must not count as the next period's client latency.
        task = asyncio.create_task(self._send(request, self._period))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _send(self, request: Request, period: int) -> None:
        started = time.monotonic()
        status, result = await self._exchange(request)
        current = period == self._period
        if current:
            self.metrics.observe_latency(time.monotonic() - started)
        self.metrics.requests.labels(status).inc()
        self.checks.record(result, current=current)

    async def _exchange(self, request: Request) -> tuple[str, Result]:
        """The answer's status label and its check result."""
        path, params = request
        sent_at = time.time()
        try:
            response = await self._client.get(path, params=params)
        except httpx.HTTPError:
            return "error", self.checks.judge(None, request, b"")
        result = self.checks.judge(response.status_code, request, response.content, sent_at)
        return str(response.status_code), result

    async def warmup(self) -> WarmupReport:
        """Send the profile's working set once and wait for every answer.

        The answers are judged and counted, but their latencies are not client latency:
        a fresh build's first answers are slow by design.
        """
        started = time.monotonic()
        answers = await asyncio.gather(*(self._exchange(r) for r in self.profile.working_set))
        for _, result in answers:
            self.checks.record(result)  # the new build's first answers
        statuses = [status for status, _ in answers]
        ok = sum(1 for status in statuses if status.startswith("2"))
        return WarmupReport(len(statuses), ok, round(time.monotonic() - started, 3))

    async def stop(self, grace_seconds: float = _STOP_GRACE_SECONDS) -> None:
        """Stop issuing, abandon requests in flight and release connections.

        Bounded: what has not wound down within `grace_seconds` (per step) is left to
        the process's exit, so a stop never waits on a slow target or a stuck pool.
        """
        self._stopped = True
        self._running.set()
        for task in list(self._inflight):
            task.cancel()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=grace_seconds)
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(self._client.aclose(), grace_seconds)
