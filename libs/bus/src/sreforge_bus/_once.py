"""Once per run: a run-store key created by whoever does the work, so nobody does it twice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sreforge_bus._names import once_key

if TYPE_CHECKING:
    from sreforge_bus._runs import RunStore

__all__ = ["Once"]


class Once:
    """`owner`'s once-per-run work on one run: the KV key `<owner>.<run_id>`.

    `claim` is the one atomic decision (True for exactly one caller, across processes
    and redeliveries). What it stores, or what `record` stores later, is what a
    redelivery reads back (`value`) to replay or resume instead of acting twice.
    """

    def __init__(self, store: RunStore, owner: str, run_id: str) -> None:
        self._store = store
        self.owner = owner
        self.run_id = run_id
        self.key = once_key(owner, run_id)

    async def claim(self, value: bytes) -> bool:
        """Create the key holding `value`: True if this call did, False if it was there."""
        return await self._store.claim(self.key, value)

    async def value(self) -> bytes | None:
        """What the key holds now, or None when nobody has claimed it."""
        entry = await self._store.get(self.key)
        return None if entry is None else entry.value

    async def claimed(self) -> bool:
        """Whether somebody has claimed the work."""
        return await self._store.get(self.key) is not None

    async def record(self, value: bytes) -> None:
        """Replace what the claim holds (the work's outcome, once it is done)."""
        await self._store.put(self.key, value)
