"""Holdings: how many libraries of the lending network hold a book, and how many copies
are on a shelf right now.

A live service's counts change as copies are lent and returned, so its callers must not
keep them. Here how many libraries hold a book is fixed per ISBN, and the copies on a
shelf change every `SHELF_CHANGE_SECONDS` of wall-clock time (each book at its own
moment), a pure function of the ISBN and the time: a load generator can check every
answer, and a caller that kept counts from earlier (a cache, a table fetched at start)
answers stale ones.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
import time
from collections.abc import Callable

HOLDINGS_SECONDS = 0.08
"""How long a holdings answer takes by default (± a fifth of it): a quick count, unlike
an edition lookup."""


SHELF_CHANGE_SECONDS = 10.0
"""How often the copies on a shelf change for a book, in wall-clock seconds at any time
scale: a table of counts fetched once is mostly stale ten seconds later."""


def holdings(isbn: str, at: float | None = None) -> dict[str, object]:
    """The holdings of the book with this ISBN at wall-clock time `at` (now when None), as
    `GET /v1/holdings/<isbn>` answers them."""
    moment = time.time() if at is None else at
    return _counts(isbn, _turn(isbn, moment))


def holdings_between(isbn: str, start: float, end: float) -> list[dict[str, object]]:
    """Every answer `holdings(isbn, at)` gives for `start` <= `at` <= `end`, oldest first."""
    first, last = _turn(isbn, start), _turn(isbn, max(start, end))
    return [_counts(isbn, turn) for turn in range(first, last + 1)]


def _turn(isbn: str, at: float) -> int:
    """Which shelf count of the book holds at `at`: each book changes at its own phase."""
    phase = int.from_bytes(_digest(f"holdings:{isbn}")[2:4]) / 65536 * SHELF_CHANGE_SECONDS
    return math.floor((at + phase) / SHELF_CHANGE_SECONDS)


def _counts(isbn: str, turn: int) -> dict[str, object]:
    libraries = 1 + _digest(f"holdings:{isbn}")[0] % 12
    available = _digest(f"holdings:{isbn}:{turn}")[0] % (libraries + 1)
    return {"isbn": isbn, "libraries": libraries, "available": available}


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


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
