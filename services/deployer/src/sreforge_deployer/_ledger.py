"""The deployer's once-only claims in KV: `deployer.<stage>.<run_id>` and their outcomes.

A claim is created naming its holder (pid, boot id, process start time); once the
stage is done its events are stored under the same key, so a redelivered input
republishes exactly what the first delivery did. A pending claim whose holder is no
longer running was cut short: `take_over` hands it to this process (compare-and-swap,
so one restarted deployer gets it) to finish or repeat the stage.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import psutil
from sreforge_bus import CasConflict, RunStore, deployer_stage
from sreforge_contracts import Event, RunState, parse_event

__all__ = ["PENDING", "HolderState", "KvClaims", "StageLedger", "this_process"]

PENDING = b"{}"
"""A claim of the older format, naming no holder (taken for one that stopped)."""

HolderState = Literal["here", "elsewhere", "gone"]
"""Who holds a pending claim: this process, another live one, or nobody running."""

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_START_SLACK_S = 0.05  # create_time is boot time + clock ticks: the same within a boot


@functools.cache
def this_process() -> dict[str, object]:
    """This process as a claim names it: pid, boot id, start time (pid reuse told apart)."""
    boot = _BOOT_ID.read_text().strip() if _BOOT_ID.exists() else ""
    return {"pid": os.getpid(), "boot": boot, "started": psutil.Process().create_time()}


def holder_state(holder: object) -> HolderState:
    """Whether a claim's recorded holder is this process, another live one, or gone."""
    if not isinstance(holder, dict):
        return "gone"
    me = this_process()
    if holder == me:
        return "here"
    pid, started = holder.get("pid"), holder.get("started")
    if holder.get("boot") != me["boot"] or not isinstance(pid, int):
        return "gone"
    try:
        process = psutil.Process(pid)
        running = process.status() != psutil.STATUS_ZOMBIE
        same = isinstance(started, float) and abs(process.create_time() - started) < _START_SLACK_S
    except psutil.NoSuchProcess:
        return "gone"
    return "elsewhere" if running and same else "gone"


class StageLedger:
    """One stage of one run: claim it once, then remember the events it produced."""

    def __init__(self, runs: RunStore, stage: str, run_id: str) -> None:
        self._runs = runs
        self._once = runs.once(deployer_stage(stage), run_id)
        self.key = self._once.key

    async def claim(self) -> bool:
        """True when this call is the one that does the stage."""
        return await self._once.claim(_held_here())

    async def outcome(self) -> list[Event] | None:
        """The stored events of a finished stage; None while pending (or never claimed)."""
        value = await self._once.value()
        stored = None if value is None else json.loads(value)
        if not isinstance(stored, dict) or "events" not in stored:
            return None
        return [parse_event(json.dumps(item)) for item in stored["events"]]

    async def holder(self) -> HolderState:
        """Who holds the pending claim ("gone" also when it names nobody)."""
        value = await self._once.value()
        stored = None if value is None else json.loads(value)
        return holder_state(stored.get("holder") if isinstance(stored, dict) else None)

    async def take_over(self) -> bool:
        """Make this process the holder of the pending claim; False when someone else
        did first, or the stage finished meanwhile."""
        entry = await self._runs.get(self.key)
        if entry is None or "events" in json.loads(entry.value):
            return False
        try:
            await self._runs.update(self.key, _held_here(), entry.revision)
        except CasConflict:
            return False
        return True

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

    async def holder(self, stage: str, run_id: str) -> HolderState:
        """Who holds the stage's pending claim."""
        return await StageLedger(self._runs, stage, run_id).holder()

    async def take_over(self, stage: str, run_id: str) -> bool:
        """Re-claim a pending stage whose holder stopped, for this process."""
        return await StageLedger(self._runs, stage, run_id).take_over()

    async def ended(self, run_id: str) -> bool:
        """Whether `deployer.cleanup.<run_id>` is claimed."""
        return await self._runs.once(deployer_stage("cleanup"), run_id).claimed()

    async def run_state(self, run_id: str) -> RunState | None:
        """The run's state entry, validated (`ValueError` when unreadable)."""
        return await self._runs.run_state(run_id)


def _held_here() -> bytes:
    return json.dumps({"holder": this_process()}).encode()
