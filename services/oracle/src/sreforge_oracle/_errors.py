"""The one exception tree of the oracle package.

OracleError
├── ProbeError      Prometheus (or the load generator) could not be read
├── GradingError    grading could not observe the window (the probe kept failing)
└── GradingInterrupted  the service is stopping mid-grading; the run resumes on redelivery
"""

from __future__ import annotations

__all__ = ["GradingError", "GradingInterrupted", "OracleError", "ProbeError"]


class OracleError(Exception):
    """Base of every error the oracle raises on purpose."""


class ProbeError(OracleError):
    """A probe request failed; `endpoint` names the URL and query at fault."""

    def __init__(self, message: str, *, endpoint: str) -> None:
        super().__init__(f"{endpoint}: {message}")
        self.endpoint = endpoint


class GradingError(OracleError):
    """The grading window could not be observed, so no honest verdict exists (→ `error`)."""


class GradingInterrupted(OracleError):
    """The oracle is stopping mid-grading: samples are saved, the input goes back for a resume."""
