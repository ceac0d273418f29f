"""The HTTP application: edition lookups, holdings, health and metrics, as a plain ASGI app.

No web framework: four routes do not need one, and the service stays small (it runs
beside several others on one machine).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ._catalogue import Catalogue
from ._holdings import HoldingsPacing, holdings
from ._metrics import Instruments, build_instruments
from ._pacing import LookupSchedule, Pacing

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOKUP = "/v1/books/{isbn}"
_LOOKUP_PREFIX = "/v1/books/"
_HOLDINGS = "/v1/holdings/{isbn}"
_HOLDINGS_PREFIX = "/v1/holdings/"
_JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Capacity:
    """How many lookups are served at once (0: no limit), and how long one may wait for
    its turn before it is refused with a 503 (0: as long as it takes).

    A lookup keeps its place and its slot when its caller stops waiting: the service does
    not notice a closed connection until it answers.
    """

    slots: int = 0
    queue_timeout_seconds: float = 0.0


def create_app(
    pacing: Pacing,
    catalogue: Catalogue | None = None,
    capacity: Capacity | None = None,
    holdings_pacing: HoldingsPacing | None = None,
    holdings_capacity: Capacity | None = None,
) -> App:
    """The service for one pacing configuration over `catalogue` (curated editions only
    when None), serving at most `capacity` lookups at once (no limit when None); holdings
    answers take `holdings_pacing`'s time, at most `holdings_capacity` at once (no limit
    when None), in turns of their own."""
    editions = Catalogue() if catalogue is None else catalogue
    schedule = LookupSchedule(pacing)
    counts = holdings_pacing or HoldingsPacing(seed=pacing.seed)
    metrics = build_instruments()
    turns = _Turns(capacity or Capacity())
    holdings_turns = _Turns(holdings_capacity or Capacity())

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        isbn = _isbn_in(path, _LOOKUP_PREFIX)
        held = _isbn_in(path, _HOLDINGS_PREFIX)
        if path not in ("/healthz", "/metrics") and isbn is None and held is None:
            await _json(send, 404, {"detail": "Not Found"})
        elif scope["method"] != "GET":
            await _json(send, 405, {"detail": "Method Not Allowed"})
        elif path == "/healthz":
            await _json(send, 200, {"status": "ok", "editions": len(editions)})
        elif path == "/metrics":
            await _reply(send, 200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
        elif isbn is not None:
            await _lookup(schedule, turns, metrics, editions, isbn, send)
        elif held is not None:
            await _holdings(counts, holdings_turns, metrics, editions, held, send)

    return app


def _isbn_in(path: str, prefix: str) -> str | None:
    """The `{isbn}` of a path under `prefix` (one non-empty segment), else None."""
    isbn = path.removeprefix(prefix)
    return isbn if isbn != path and isbn and "/" not in isbn else None


class _Turns:
    """First come, first served slots for lookups (a no-op without a limit)."""

    def __init__(self, capacity: Capacity) -> None:
        self._capacity = capacity
        self._slots = asyncio.Semaphore(capacity.slots) if capacity.slots > 0 else None

    async def take(self) -> bool:
        """Wait for a slot; False when the wait ran past the queue timeout."""
        if self._slots is None:
            return True
        timeout = self._capacity.queue_timeout_seconds or None
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout)
        except TimeoutError:
            return False
        return True

    def give_back(self) -> None:
        """Free the slot `take` granted."""
        if self._slots is not None:
            self._slots.release()


async def _lookup(
    schedule: LookupSchedule,
    turns: _Turns,
    metrics: Instruments,
    editions: Catalogue,
    isbn: str,
    send: Send,
) -> None:
    started = time.perf_counter()
    metrics.inflight.inc()
    try:
        status, body = await _answer(schedule, turns, editions, isbn)
    finally:
        metrics.inflight.dec()
    metrics.requests.labels(_LOOKUP, str(status)).inc()
    metrics.duration.labels(_LOOKUP).observe(time.perf_counter() - started)
    await _json(send, status, body)


async def _holdings(
    counts: HoldingsPacing,
    turns: _Turns,
    metrics: Instruments,
    editions: Catalogue,
    isbn: str,
    send: Send,
) -> None:
    started = time.perf_counter()
    metrics.inflight.inc()
    try:
        served = await turns.take()
        if served:
            try:
                await asyncio.sleep(counts.next())
            finally:
                turns.give_back()
    finally:
        metrics.inflight.dec()
    known = editions.get(isbn) is not None
    if not served:
        status, body = 503, {"error": "over capacity, try again later"}
    elif known:
        status, body = 200, holdings(isbn)
    else:
        status, body = 404, {"error": f"no book with ISBN {isbn}"}
    metrics.requests.labels(_HOLDINGS, str(status)).inc()
    metrics.duration.labels(_HOLDINGS).observe(time.perf_counter() - started)
    await _json(send, status, body)


async def _answer(
    schedule: LookupSchedule, turns: _Turns, editions: Catalogue, isbn: str
) -> tuple[int, dict[str, object]]:
    delay, fails = schedule.next()
    if fails:
        return 503, {"error": "temporarily unavailable"}
    if not await turns.take():
        return 503, {"error": "over capacity, try again later"}
    try:
        await asyncio.sleep(delay)
    finally:
        turns.give_back()
    edition = editions.get(isbn)
    if edition is None:
        return 404, {"error": f"no edition with ISBN {isbn}"}
    return 200, edition.to_json()


async def _json(send: Send, status: int, payload: dict[str, object]) -> None:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    await _reply(send, status, body, _JSON)


async def _reply(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["Capacity", "create_app"]
