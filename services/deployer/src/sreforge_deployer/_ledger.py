"""The deployer's once-only claims in KV: `deployer.<stage>.<run_id>` and their outcomes.

A claim is created empty; once the stage is done its events are stored under the
same key, so a redelivered input republishes exactly what the first delivery did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sreforge_bus import RunStore
from sreforge_contracts import Event, parse_event

__all__ = ["PENDING", "StageLedger"]

PENDING = b"{}"


class StageLedger:
    """One stage of one run: claim it once, then remember the events it produced."""

    def __init__(self, runs: RunStore, stage: str, run_id: str) -> None:
        self.key = f"deployer.{stage}.{run_id}"
        self._runs = runs

    async def claim(self) -> bool:
        """True when this call is the one that does the stage."""
        return await self._runs.claim(self.key, PENDING)

    async def outcome(self) -> list[Event] | None:
        """The stored events of a finished stage; None while pending (or never claimed)."""
        entry = await self._runs.get(self.key)
        if entry is None or entry.value == PENDING:
            return None
        stored = json.loads(entry.value)
        return [parse_event(json.dumps(item)) for item in stored["events"]]

    async def save(self, events: Sequence[Event]) -> None:
        """Store the stage's events (after they are published)."""
        body = {"events": [event.model_dump(mode="json") for event in events]}
        await self._runs.put(self.key, json.dumps(body).encode())
