"""The open-model generator: arrivals follow the clock, never the responses."""

from __future__ import annotations

import asyncio
import logging
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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.rate = rate
        self.profile = profile
        self.metrics = LoadMetrics(rate, LatencyWindow(window_seconds))
        self.window = RateWindow(window_seconds)
        self.metrics.achieved.set_function(self.window.rate)
        self.metrics.inflight.set_function(lambda: len(self._inflight))
        self.checks = ResponseChecks(self.metrics.registry, window_seconds, profile.check)
        # Bumped on pause: answers to requests issued before it are the old build's.
        self._period = 0
        self._client = httpx.AsyncClient(
            base_url=target,
            timeout=timeout_seconds,
            limits=httpx.Limits(max_connections=2000, max_keepalive_connections=200),
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
            self._launch(self.profile.request(self._sequence))
            self._sequence += 1
            next_at += interval

    def _launch(self, request: Request) -> None:
        self.window.record()
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
        try:
            response = await self._client.get(path, params=params)
        except httpx.HTTPError:
            return "error", self.checks.judge(None, request, b"")
        result = self.checks.judge(response.status_code, request, response.content)
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

    async def stop(self) -> None:
        """Stop issuing, abandon requests in flight and release connections."""
        self._stopped = True
        self._running.set()
        for task in list(self._inflight):
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)
        await self._client.aclose()
