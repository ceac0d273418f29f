"""Book metadata enrichment: the upstream client behind an in-process cache."""

from __future__ import annotations

import logging
import threading

import httpx
from flask import Flask, current_app

from .cache import TTLCache
from .metrics import Instruments
from .upstream import Metadata, MetadataClient, UpstreamError

log = logging.getLogger(__name__)


class MetadataService:
    """Answers metadata lookups from the cache, going upstream on a miss.

    A stale entry is served as is while one background refresh replaces it, so
    popular ISBNs never wait on the upstream once they are cached.
    """

    def __init__(
        self, client: MetadataClient, cache: TTLCache[Metadata | None], instruments: Instruments
    ) -> None:
        self._client = client
        self._cache = cache
        self._metrics = instruments
        self._refreshing: set[str] = set()
        self._lock = threading.Lock()

    def lookup(self, isbn: str) -> Metadata | None:
        """Metadata for `isbn`, or None when unknown or the upstream is failing."""
        cached = self._cache.get(isbn)
        if cached is None:
            self._metrics.cache_lookups.labels("miss").inc()
            return self._load(isbn)
        value, fresh = cached
        if fresh:
            self._metrics.cache_lookups.labels("hit").inc()
        else:
            self._metrics.cache_lookups.labels("stale").inc()
            self._refresh_later(isbn)
        return value

    def _load(self, isbn: str) -> Metadata | None:
        try:
            value = self._client.fetch(isbn)
        except UpstreamError as exc:
            log.warning("metadata lookup for %s failed: %s", isbn, exc)
            return None
        self._cache.put(isbn, value)
        return value

    def _refresh_later(self, isbn: str) -> None:
        with self._lock:
            if isbn in self._refreshing:
                return
            self._refreshing.add(isbn)
        threading.Thread(target=self._refresh, args=(isbn,), daemon=True).start()

    def _refresh(self, isbn: str) -> None:
        try:
            self._load(isbn)
        finally:
            with self._lock:
                self._refreshing.discard(isbn)


def init_metadata(
    app: Flask, instruments: Instruments, transport: httpx.BaseTransport | None = None
) -> None:
    """Create the app's metadata service (one client, one cache per process)."""
    settings = app.config["SETTINGS"]
    client = MetadataClient(
        settings.upstream_url, settings.upstream_timeout_seconds, instruments, transport
    )
    cache: TTLCache[Metadata | None] = TTLCache(settings.cache_ttl_seconds)
    app.extensions["bookshelf.metadata"] = MetadataService(client, cache, instruments)


def get_metadata() -> MetadataService:
    """The current app's metadata service."""
    service: MetadataService = current_app.extensions["bookshelf.metadata"]
    return service
