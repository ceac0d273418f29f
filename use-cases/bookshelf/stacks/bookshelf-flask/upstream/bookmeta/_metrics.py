"""Prometheus instruments of the service."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True, slots=True)
class Instruments:
    """The metrics one server instance exports."""

    registry: CollectorRegistry
    requests: Counter
    duration: Histogram
    inflight: Gauge


def build_instruments() -> Instruments:
    """A fresh registry with the service's metrics."""
    registry = CollectorRegistry()
    return Instruments(
        registry=registry,
        requests=Counter(
            "bookmeta_requests_total",
            "Metadata requests served, by endpoint and status code.",
            ["endpoint", "status"],
            registry=registry,
        ),
        duration=Histogram(
            "bookmeta_request_duration_seconds",
            "Time to serve a metadata request.",
            ["endpoint"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 1.1, 1.2, 1.3, 1.5, 2.0, 5.0),
            registry=registry,
        ),
        inflight=Gauge(
            "bookmeta_inflight_requests",
            "Metadata requests being served right now.",
            registry=registry,
        ),
    )
