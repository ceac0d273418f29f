"""The one exception tree of the sreforge-prom package.

PrometheusError
├── PrometheusUnreachable   no answer: connection refused, reset, timed out
└── PrometheusAnswerError   an answer, but not a success of the expected shape
"""

from __future__ import annotations

__all__ = ["PrometheusAnswerError", "PrometheusError", "PrometheusUnreachable"]


class PrometheusError(Exception):
    """Base of every error the client raises; `endpoint` names the URL (and query) at fault."""

    def __init__(self, message: str, *, endpoint: str) -> None:
        super().__init__(f"{endpoint}: {message}")
        self.message = message
        self.endpoint = endpoint


class PrometheusUnreachable(PrometheusError):
    """Prometheus did not answer (transport failure or the client's timeout)."""


class PrometheusAnswerError(PrometheusError):
    """Prometheus answered with an error, a non-JSON body or a body of the wrong shape."""
