"""A small thread-safe TTL cache that can serve an expired entry while it is refreshed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Entry(Generic[V]):
    """A cached value and when it was stored (monotonic seconds)."""

    value: V
    stored_at: float


class TTLCache(Generic[V]):
    """Entries are fresh for `ttl_seconds`; after that they are stale for another
    `stale_seconds` (callers may serve them while fetching a new value) and then gone.
    """

    def __init__(
        self,
        ttl_seconds: float,
        stale_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        self.ttl_seconds = ttl_seconds
        self.stale_seconds = ttl_seconds if stale_seconds is None else stale_seconds
        self._clock = clock
        self._entries: dict[str, Entry[V]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[V, bool] | None:
        """(value, is_fresh), or None when there is no usable entry."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            age = now - entry.stored_at
            if age >= self.ttl_seconds + self.stale_seconds:
                del self._entries[key]
                return None
        return entry.value, age < self.ttl_seconds

    def put(self, key: str, value: V) -> None:
        """Store `value` under `key`, fresh from now."""
        entry = Entry(value, self._clock())
        with self._lock:
            self._entries[key] = entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
