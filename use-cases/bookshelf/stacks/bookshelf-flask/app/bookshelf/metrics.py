"""Prometheus instruments and the request hooks that feed them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from flask import Flask, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)

# Fine around the 50 ms - 2.5 s range where latency objectives live.
REQUEST_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
    0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 5.0, 10.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0)
# Probes and scrapes are not user traffic.
UNOBSERVED_PATHS = frozenset({"/metrics", "/healthz"})


@dataclass(frozen=True, slots=True)
class Instruments:
    """The metrics one app instance exports, on their own registry."""

    registry: CollectorRegistry
    request_duration: Histogram
    requests: Counter
    upstream_requests: Counter
    upstream_duration: Histogram
    cache_lookups: Counter


def build_instruments() -> Instruments:
    """A fresh registry holding the app's metrics, and the serving process's own
    (`process_start_time_seconds`, `process_resident_memory_bytes`, ...)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    labels = ["method", "endpoint", "status"]
    return Instruments(
        registry=registry,
        request_duration=Histogram(
            "bookshelf_http_request_duration_seconds",
            "Time to serve an HTTP request, by route template.",
            labels,
            buckets=REQUEST_BUCKETS,
            registry=registry,
        ),
        requests=Counter(
            "bookshelf_http_requests_total",
            "HTTP requests served, by route template and status code.",
            labels,
            registry=registry,
        ),
        upstream_requests=Counter(
            "bookshelf_upstream_requests_total",
            "Calls to the book-metadata service, by outcome.",
            ["outcome"],
            registry=registry,
        ),
        upstream_duration=Histogram(
            "bookshelf_upstream_request_duration_seconds",
            "Duration of calls to the book-metadata service, by outcome.",
            ["outcome"],
            buckets=UPSTREAM_BUCKETS,
            registry=registry,
        ),
        cache_lookups=Counter(
            "bookshelf_metadata_cache_lookups_total",
            "Metadata cache lookups, by result (hit, stale, miss).",
            ["result"],
            registry=registry,
        ),
    )


def init_metrics(app: Flask, instruments: Instruments) -> None:
    """Time every request and serve the registry on GET /metrics."""

    @app.before_request
    def _start_timer() -> None:
        g.request_started = time.perf_counter()

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.pop("request_started", None)
        if started is None or request.path in UNOBSERVED_PATHS:
            return response
        endpoint = request.url_rule.rule if request.url_rule is not None else "<unmatched>"
        labels = (request.method, endpoint, str(response.status_code))
        instruments.request_duration.labels(*labels).observe(time.perf_counter() - started)
        instruments.requests.labels(*labels).inc()
        return response

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(instruments.registry), mimetype=CONTENT_TYPE_LATEST)
