"""Response checks: did the target still do its job, answer by answer?

Each completed request is judged `ok` (a 2xx that is the complete, true answer),
`degraded` (a 2xx short of it: fewer hits, missing metadata), `wrong` (a 2xx that
disagrees with the truth: invented or altered hits, wrong order, made-up metadata, no
answer at all) or `failed` (any other status, a timeout, a transport error). The share
of `ok` over a sliding window is the synthetic correctness check: a target that answers
fast by answering less, or by answering something else, must not look healthy.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

Result = Literal["ok", "degraded", "wrong", "failed"]
RESULTS: tuple[Result, ...] = ("ok", "degraded", "wrong", "failed")

# (path, query parameters)
Request = tuple[str, dict[str, str]]
# The verdict on a 2xx body for the request that produced it, sent at a wall-clock time
# (None: just now); an answer that changes with time, like a book's holdings, is judged
# over the exchange.
AnswerCheck = Callable[[Request, bytes, float | None], Literal["ok", "degraded", "wrong"]]


def judge(
    status_code: int | None,
    request: Request,
    body: bytes,
    check: AnswerCheck | None,
    sent_at: float | None = None,
) -> Result:
    """One answer's result; `status_code` is `None` for a timeout or transport error.

    Without a check (profiles with no expected answers) any 2xx is ok. `sent_at` is when
    the request left (wall clock; now when None).
    """
    if status_code is None or not 200 <= status_code < 300:
        return "failed"
    return "ok" if check is None else check(request, body, sent_at)


class OkWindow:
    """The share of checked responses that were `ok` over the last `window_seconds`.

    NaN while the window holds no response: no answers is no evidence either way.
    """

    def __init__(self, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_seconds
        self._clock = clock
        self._ok: deque[float] = deque()
        self._not_ok: deque[float] = deque()
        self._lock = threading.Lock()  # the control server's threads read it

    def record(self, result: Result) -> None:
        """One response was judged now."""
        with self._lock:
            (self._ok if result == "ok" else self._not_ok).append(self._clock())

    def clear(self) -> None:
        """Forget every response so far."""
        with self._lock:
            self._ok.clear()
            self._not_ok.clear()

    def ratio(self) -> float:
        """ok / checked over the window, or NaN without a checked response."""
        with self._lock:
            horizon = self._clock() - self._window
            for times in (self._ok, self._not_ok):
                while times and times[0] <= horizon:
                    times.popleft()
            ok, checked = len(self._ok), len(self._ok) + len(self._not_ok)
        return ok / checked if checked else math.nan


class ResponseChecks:
    """The profile's check, its sliding ok window and their metrics on `registry`.

    The generator records only answers that belong to the current issuing period:
    `clear()` on pause drops the old build's answers (and the errors of its drain).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        window_seconds: float,
        check: AnswerCheck | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self.window = OkWindow(window_seconds, clock)
        self.checked = Counter(
            "loadgen_responses_checked_total",
            "Completed requests by check result: ok, degraded (2xx, incomplete answer), "
            "wrong (2xx that disagrees with the expected answer), "
            "failed (other status, timeout, transport error).",
            ["result"],
            registry=registry,
        )
        for result in RESULTS:
            self.checked.labels(result)
        ok_ratio = Gauge(
            "loadgen_ok_ratio",
            "Share of checked responses that were ok over the sliding window (NaN: none).",
            registry=registry,
        )
        ok_ratio.set_function(self.window.ratio)

    def judge(
        self, status_code: int | None, request: Request, body: bytes, sent_at: float | None = None
    ) -> Result:
        """The result of one answer to `request`, sent at `sent_at`, under this profile's
        check."""
        return judge(status_code, request, body, self._check, sent_at)

    def record(self, result: Result, *, current: bool = True) -> None:
        """Count one judged answer; add it to the window if it is of the current period."""
        self.checked.labels(result).inc()
        if current:
            self.window.record(result)

    def clear(self) -> None:
        """Start a new issuing period: the window forgets earlier answers."""
        self.window.clear()
