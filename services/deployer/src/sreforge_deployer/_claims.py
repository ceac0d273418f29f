"""Whose turn a stage is: the claims protocol, and the one decision made on each input.

A stage's input comes once, or again: redelivered after a crash, after a worker's ack
deadline slipped (a spurious redelivery to the same live process), or duplicated.
`Turns.take` decides which it is from the claim (`deployer.<stage>.<run_id>`), its
recorded holder, and the stages in flight in this process:

| claim                                   | turn                                   |
|-----------------------------------------|----------------------------------------|
| absent                                  | ours: do the stage                     |
| done (events stored)                    | replay the stored events               |
| pending, held here, the stage in flight | nothing (a duplicate delivery)         |
| pending, held by another live process   | nothing (that process is at it)        |
| pending, holder gone (or held here but  | ours, resumed: taken over (CAS), the   |
| not in flight: that attempt failed)     | stage finished or repeated; logged     |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import structlog
from sreforge_contracts import Event, RunState

from sreforge_deployer._ledger import HolderState

__all__ = ["Claims", "Log", "Step", "Turn", "Turns"]

Log = structlog.stdlib.BoundLogger


class Claims(Protocol):
    """Once-per-run claims of the deployer's stages and the events each one stored."""

    async def claim(self, stage: str, run_id: str) -> bool:
        """True when this call is the one that does the stage."""
        ...

    async def outcome(self, stage: str, run_id: str) -> list[Event] | None:
        """The stored events of a finished stage; None while pending or never claimed."""
        ...

    async def save(self, stage: str, run_id: str, events: Sequence[Event]) -> None:
        """Store what the stage produced."""
        ...

    async def holder(self, stage: str, run_id: str) -> HolderState:
        """Who holds the stage's pending claim: this process, another live one, or gone."""
        ...

    async def take_over(self, stage: str, run_id: str) -> bool:
        """Make this process the pending claim's holder; False if another did first or
        the stage finished meanwhile."""
        ...

    async def ended(self, run_id: str) -> bool:
        """Whether the run's cleanup has been claimed (its stack is or will be gone)."""
        ...

    async def run_state(self, run_id: str) -> RunState | None:
        """The run's state as the bus holds it; `ValueError` when unreadable."""
        ...


@dataclass(frozen=True)
class Step:
    """Events to publish now; with `then`, the stage goes on once they are out.

    `abandon` answers a publish the bus refused (the stage undoes what it started).
    """

    events: Sequence[Event] = ()
    then: Callable[[], Awaitable[Sequence[Event]]] | None = None
    abandon: Callable[[Exception], Awaitable[Sequence[Event]]] | None = None


@dataclass(frozen=True)
class Turn:
    """`ours`: do the stage (`resumed` when taken over); else publish `events` (a replay)."""

    ours: bool
    resumed: bool = False
    events: Sequence[Event] = ()
    stored: bool = False


class Turns:
    """The stages this process has in flight, and the decision on each input."""

    def __init__(self) -> None:
        self._busy: set[tuple[str, str]] = set()

    @contextmanager
    def working(self, stage: str, run_id: str) -> Iterator[None]:
        """Mark the stage in flight here while the block runs."""
        key = (stage, run_id)
        self._busy.add(key)
        try:
            yield
        finally:
            self._busy.discard(key)

    async def take(self, claims: Claims, stage: str, run_id: str, log: Log) -> Turn:
        """Whose turn the stage is (see the module's table)."""
        if await claims.claim(stage, run_id):
            return Turn(ours=True)
        stored = await claims.outcome(stage, run_id)
        if stored is not None:
            return Turn(ours=False, events=stored, stored=True)
        holder = await claims.holder(stage, run_id)
        if holder == "here" and (stage, run_id) in self._busy:
            log.info("deployer.duplicate_delivery", run_id=run_id, stage=stage)
            return Turn(ours=False)
        if holder == "elsewhere":
            log.warning("deployer.stage_held_elsewhere", run_id=run_id, stage=stage)
            return Turn(ours=False)
        if not await claims.take_over(stage, run_id):
            stored = await claims.outcome(stage, run_id)
            return Turn(ours=False, events=stored or (), stored=stored is not None)
        why = "its holder stopped" if holder == "gone" else "its attempt in this process failed"
        log.error(
            "deployer.stage_resumed",
            run_id=run_id,
            stage=stage,
            reason=f"the {stage} stage was interrupted ({why}); finishing or repeating it here",
        )
        return Turn(ours=True, resumed=True)
