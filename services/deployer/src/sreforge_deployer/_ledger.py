"""The deployer's once-only claims in KV: `deployer.<stage>.<run_id>` and their outcomes.

A claim is created empty; once the stage is done its events are stored under the
same key, so a redelivered input republishes exactly what the first delivery did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sreforge_bus import RunStore, deployer_stage
from sreforge_contracts import Event, RunState, parse_event

__all__ = ["PENDING", "KvClaims", "StageLedger"]

PENDING = b"{}"


class StageLedger:
    """One stage of one run: claim it once, then remember the events it produced."""

    def __init__(self, runs: RunStore, stage: str, run_id: str) -> None:
        self._once = runs.once(deployer_stage(stage), run_id)
        self.key = self._once.key

    async def claim(self) -> bool:
        """True when this call is the one that does the stage."""
        return await self._once.claim(PENDING)

    async def outcome(self) -> list[Event] | None:
        """The stored events of a finished stage; None while pending (or never claimed)."""
        value = await self._once.value()
        if value is None or value == PENDING:
            return None
        stored = json.loads(value)
        return [parse_event(json.dumps(item)) for item in stored["events"]]

    async def save(self, events: Sequence[Event]) -> None:
        """Store the stage's events (after they are published)."""
        body = {"events": [event.model_dump(mode="json") for event in events]}
        await self._once.record(json.dumps(body).encode())


class KvClaims:
    """The saga's `Claims` in the bus's run store: one `StageLedger` per stage."""

    def __init__(self, runs: RunStore) -> None:
        self._runs = runs

    async def claim(self, stage: str, run_id: str) -> bool:
        """True when this call is the one that does the stage."""
        return await StageLedger(self._runs, stage, run_id).claim()

    async def outcome(self, stage: str, run_id: str) -> list[Event] | None:
        """The stored events of a finished stage; None while pending or never claimed."""
        return await StageLedger(self._runs, stage, run_id).outcome()

    async def save(self, stage: str, run_id: str, events: Sequence[Event]) -> None:
        """Store the stage's events."""
        await StageLedger(self._runs, stage, run_id).save(events)

    async def ended(self, run_id: str) -> bool:
        """Whether `deployer.cleanup.<run_id>` is claimed."""
        return await self._runs.once(deployer_stage("cleanup"), run_id).claimed()

    async def run_state(self, run_id: str) -> RunState | None:
        """The run's state entry, validated (`ValueError` when unreadable)."""
        return await self._runs.run_state(run_id)
