"""Holdings: how many libraries of the lending network hold a book, and how many copies
are on a shelf right now.

A live service's counts change by the minute, so its callers must not cache them; here
they are a pure function of the ISBN, so a load generator can check every answer.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable

HOLDINGS_SECONDS = 0.08
"""How long a holdings answer takes by default (± a fifth of it): a quick count, unlike
an edition lookup."""


def holdings(isbn: str) -> dict[str, object]:
    """The holdings of the book with this ISBN, as `GET /v1/holdings/<isbn>` answers them."""
    digest = hashlib.blake2b(f"holdings:{isbn}".encode(), digest_size=8).digest()
    libraries = 1 + digest[0] % 12
    return {"isbn": isbn, "libraries": libraries, "available": digest[1] % (libraries + 1)}


class HoldingsPacing:
    """How long each holdings answer takes: `seconds` ± a fifth, reproducible from `seed`.

    With `stall_seconds` > 0 the count also stalls for that long every
    `stall_every_seconds` from the start (a sync pass over the lending network): an
    answer that starts during a stall waits for its end first, and one under way when a
    stall begins takes that much longer.
    """

    def __init__(
        self,
        seconds: float = HOLDINGS_SECONDS,
        seed: int = 7,
        *,
        stall_seconds: float = 0.0,
        stall_every_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if seconds < 0:
            raise ValueError(f"holdings seconds must not be negative, got {seconds}")
        if stall_seconds < 0 or (stall_seconds > 0 and stall_every_seconds <= stall_seconds):
            raise ValueError(
                "a holdings stall must last 0 s or more and recur at intervals longer than "
                f"it lasts, got {stall_seconds} s every {stall_every_seconds} s"
            )
        self._seconds = seconds
        self._random = random.Random(seed)
        self._stall = (stall_seconds, stall_every_seconds)
        self._clock = clock
        self._origin = clock()
        self._lock = threading.Lock()

    def next(self) -> float:
        """The delay of the next answer, in seconds: its own time, past any stall it
        starts in or runs into."""
        spread = self._seconds / 5
        with self._lock:
            own = max(0.0, self._seconds + self._random.uniform(-spread, spread))
        stall, every = self._stall
        if stall <= 0:
            return own
        now = self._clock() - self._origin
        start = now + self._stall_left(now)
        end = start + own
        next_stall = (start // every + 1) * every
        if next_stall < end:
            end += stall
        return end - now

    def stalled_for(self) -> float:
        """How much longer the stall under way lasts (0 outside one)."""
        return self._stall_left(self._clock() - self._origin)

    def _stall_left(self, since_start: float) -> float:
        stall, every = self._stall
        return max(0.0, stall - since_start % every) if stall > 0 else 0.0
