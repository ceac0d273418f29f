"""HTTP client for the book-metadata service."""

from __future__ import annotations

import time
from typing import Any

import httpx

from .metrics import Instruments

Metadata = dict[str, Any]


class UpstreamError(Exception):
    """The metadata service could not answer (5xx, timeout, connection error)."""


class MetadataClient:
    """Looks editions up by ISBN-13. Safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        timeout_seconds: float,
        instruments: Instruments,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._metrics = instruments
        self._http = httpx.Client(
            base_url=base_url,
            timeout=timeout_seconds,
            transport=transport,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )

    def fetch(self, isbn: str) -> Metadata | None:
        """The edition's metadata, or None when the service does not know the ISBN."""
        started = time.perf_counter()
        outcome = "error"
        try:
            response = self._http.get(f"/v1/books/{isbn}")
            if response.status_code == 404:
                outcome = "not_found"
                return None
            if response.status_code >= 400:
                raise UpstreamError(f"metadata service answered {response.status_code}")
            outcome = "ok"
            body: Metadata = response.json()
            return body
        except httpx.TimeoutException as exc:
            outcome = "timeout"
            raise UpstreamError(f"metadata service timed out: {exc}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(f"metadata service unreachable: {exc}") from exc
        finally:
            self._metrics.upstream_requests.labels(outcome).inc()
            self._metrics.upstream_duration.labels(outcome).observe(time.perf_counter() - started)

    def close(self) -> None:
        """Release pooled connections."""
        self._http.close()
