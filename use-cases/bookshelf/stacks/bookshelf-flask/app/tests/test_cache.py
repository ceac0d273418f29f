from __future__ import annotations

import threading
import time

import httpx
import pytest

from bookshelf.cache import TTLCache
from bookshelf.metadata import MetadataService
from bookshelf.metrics import build_instruments
from bookshelf.upstream import MetadataClient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_entries_are_fresh_then_stale_then_gone() -> None:
    clock = Clock()
    cache: TTLCache[str] = TTLCache(10, stale_seconds=5, clock=clock)
    cache.put("k", "v")
    assert cache.get("k") == ("v", True)
    clock.now += 10
    assert cache.get("k") == ("v", False)
    clock.now += 5
    assert cache.get("k") is None
    assert len(cache) == 0


def test_stale_window_defaults_to_the_ttl() -> None:
    clock = Clock()
    cache: TTLCache[int] = TTLCache(3, clock=clock)
    cache.put("k", 1)
    clock.now += 5.9
    assert cache.get("k") == (1, False)


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        TTLCache(0)


def _service(handler: httpx.MockTransport, clock: Clock) -> MetadataService:
    instruments = build_instruments()
    client = MetadataClient("http://metadata.test", 1.0, instruments, handler)
    return MetadataService(client, TTLCache(60, clock=clock), instruments)


def test_repeat_lookups_are_served_from_cache() -> None:
    calls: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(200, json={"title": "Dune"})

    service = _service(httpx.MockTransport(handle), Clock())
    assert service.lookup("9780591541281") == {"title": "Dune"}
    assert service.lookup("9780591541281") == {"title": "Dune"}
    assert len(calls) == 1


def test_unknown_isbns_are_cached_too() -> None:
    calls: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(404)

    service = _service(httpx.MockTransport(handle), Clock())
    assert service.lookup("9790000000001") is None
    assert service.lookup("9790000000001") is None
    assert len(calls) == 1


def test_failures_are_not_cached() -> None:
    calls: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(503)

    service = _service(httpx.MockTransport(handle), Clock())
    assert service.lookup("9780591541281") is None
    assert service.lookup("9780591541281") is None
    assert len(calls) == 2


def test_stale_entry_is_served_while_refreshed_in_background() -> None:
    clock = Clock()
    refreshed = threading.Event()
    titles = iter(["old", "new"])

    def handle(request: httpx.Request) -> httpx.Response:
        title = next(titles)
        if title == "new":
            refreshed.set()
        return httpx.Response(200, json={"title": title})

    service = _service(httpx.MockTransport(handle), clock)
    assert service.lookup("9780591541281") == {"title": "old"}
    clock.now += 61
    assert service.lookup("9780591541281") == {"title": "old"}
    assert refreshed.wait(5), "stale entry was never refreshed"
    deadline = time.monotonic() + 5
    while service.lookup("9780591541281") != {"title": "new"}:
        assert time.monotonic() < deadline, "refreshed value never replaced the stale one"
        time.sleep(0.01)
