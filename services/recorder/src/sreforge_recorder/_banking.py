"""Banking policy: which records may enter the record store. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sreforge_contracts import RunRecord

__all__ = ["VERDICT_BEARING", "Banking", "bank_refusal"]

VERDICT_BEARING = frozenset({"passed", "failed", "rejected"})
"""Verdicts that grade the agent's work; aborted/error runs measured nothing about it."""


@dataclass(frozen=True, slots=True)
class Banking:
    """What banking did with a record: where it went, or why it was refused."""

    banked: bool
    refusal: str | None = None
    store_path: Path | None = None
    pruned_path: Path | None = None

    def as_json(self) -> dict[str, object]:
        """The `banking.json` written beside the record."""
        return {
            "banked": self.banked,
            "refusal": self.refusal,
            "store_path": str(self.store_path) if self.store_path else None,
            "pruned_path": str(self.pruned_path) if self.pruned_path else None,
        }


def bank_refusal(record: RunRecord, *, allow_unlabelled: bool) -> str | None:
    """Why `record` may not be banked, or None when it may: the one banking rule.

    Only measured runs are banked: an aborted or error run (a setup fault, an alert that
    never fired, an engine fault) graded nothing the agent did, so it stays in `runs/`.
    A proof run (its agent profile was unverified) is never banked, whatever
    its verdict: the profile has not shown it works here. A verdict whose
    measurement conditions are unknown is not quotable either: a verdict-bearing
    record needs an `agent_transcript` header with a known confinement, unless
    the operator deliberately allows unlabelled records.
    """
    if record.proof_run:
        agent = record.trajectory.agent_name
        return (
            f"run {record.run_id}: proof run of an unverified profile {agent!r}; not banked "
            f"(run `sreforge agents check {agent}` to verify the profile)"
        )
    if record.verdict not in VERDICT_BEARING:
        return (
            f"run {record.run_id}: verdict {record.verdict!r} measured nothing about the agent "
            "(a setup, alert or engine fault); kept in runs/ only"
        )
    if allow_unlabelled:
        return None
    if record.agent_transcript is None:
        return (
            f"run {record.run_id}: verdict {record.verdict!r} carries no agent_transcript "
            "header (confinement unknown); not banked (override: allow_unlabelled)"
        )
    return None
