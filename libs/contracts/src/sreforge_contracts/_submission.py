"""What the agent handed back: the diff, whether it submitted, its RCA and evidence."""

from __future__ import annotations

from pydantic import Field, JsonValue

from sreforge_contracts._base import Contract

__all__ = ["SUBMISSION_DIR", "Submission"]

SUBMISSION_DIR = ".oncall"
"""The workspace folder where the agent's `submit` leaves its sentinel and RCA: git-ignored,
never part of the diff, kept when CI cleans the checkout. Neutral: the agent sees it."""


class Submission(Contract):
    """The agent's result as the runner saw it.

    `diff` is taken against the base commit (new, staged and committed files,
    excluding `SUBMISSION_DIR`); `transcript_ref` points at the captured
    agent-transcript file; `evidence` is the gateway's (secret-free) evidence.
    """

    agent_name: str = Field(min_length=1)
    diff: str = ""
    submitted: bool
    rca: str | None = None
    transcript_ref: str | None = None
    duration_ms: float = Field(ge=0)
    stop_reason: str | None = None
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
