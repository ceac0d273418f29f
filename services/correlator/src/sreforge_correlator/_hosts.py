"""Runs whose worker host is gone: pure decisions over the run, its owner and its lease.

A run taken by a worker host (`deployer.owner.<run>`) lives and dies with that host's
lease (`deployer.host.<host>`). When the lease is released, expires unrenewed or is
re-taken by a new process under the same name, the run's stack is gone with its host,
so the correlator fails the run: RunFailed{stage=worker, verdict=error}, once (a CAS to
`failed` first, a deterministic event id), and the recorder writes its one record.
"""

from __future__ import annotations

from datetime import datetime

from sreforge_bus import Lease, RunOwner, owner_lost
from sreforge_contracts import RunFailed, RunState

from sreforge_correlator._machine import PRODUCER, entered_at

__all__ = ["WORKER_STAGE", "host_lost", "host_lost_again"]

WORKER_STAGE = "worker"


def _event_id(run_id: str) -> str:
    return f"{run_id}.RunFailed.{WORKER_STAGE}"


def host_lost(
    state: RunState, owner: RunOwner | None, lease: Lease | None, now: datetime
) -> RunFailed | None:
    """The failure of a live run whose owning host lost its lease, else None."""
    if owner is None or state.terminal or state.phase == "recorded":
        return None
    why = owner_lost(owner, lease, now.timestamp())
    if why is None:
        return None
    return _host_failure(state.run_id, now, f"{why} while the run was {state.phase}")


def host_lost_again(state: RunState) -> RunFailed | None:
    """The same RunFailed again for a run this very failure ended (a correlator that died
    between its state write and its publish owes it; the id deduplicates it)."""
    prefix = f"{WORKER_STAGE}: "
    at = entered_at(state)
    if state.phase != "failed" or not state.failure or not state.failure.startswith(prefix):
        return None
    if at is None:
        return None
    return _host_failure(state.run_id, at, state.failure.removeprefix(prefix))


def _host_failure(run_id: str, at: datetime, reason: str) -> RunFailed:
    """The one RunFailed a lost host's run gets (its id deduplicates a second publish)."""
    return RunFailed(
        event_id=_event_id(run_id),
        run_id=run_id,
        producer=PRODUCER,
        occurred_at=at,
        stage=WORKER_STAGE,
        reason=reason,
        verdict="error",
    )
