"""One Prometheus HTTP API client and one Prometheus duration parser for all of SREForge.

`PrometheusClient` (blocking) and `AsyncPrometheusClient` read one Prometheus: instant
queries as of a time, range queries, alerts, targets, rules, runtime info and readiness,
as typed values; every failure is a `PrometheusError`. `duration_ms` reads a duration as
Prometheus does; `format_duration` and `scale_duration` write one.
`shared_tls_context` is the TLS context every harness HTTP client is given.
"""

from sreforge_prom._client import AsyncPrometheusClient, PrometheusClient
from sreforge_prom._duration import (
    DURATION_PATTERN,
    duration_ms,
    duration_seconds,
    format_duration,
    scale_duration,
)
from sreforge_prom._errors import PrometheusAnswerError, PrometheusError, PrometheusUnreachable
from sreforge_prom._model import Alert, Rule, RuleGroup, RuntimeInfo, Sample, Series, Target
from sreforge_prom._tls import shared_tls_context

__all__ = [
    "DURATION_PATTERN",
    "Alert",
    "AsyncPrometheusClient",
    "PrometheusAnswerError",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusUnreachable",
    "Rule",
    "RuleGroup",
    "RuntimeInfo",
    "Sample",
    "Series",
    "Target",
    "duration_ms",
    "duration_seconds",
    "format_duration",
    "scale_duration",
    "shared_tls_context",
]
