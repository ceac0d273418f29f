"""The correlator's only I/O: run state, routes and start plans in KV `sreforge-runs`.

Keys: `<run_id>` → RunState JSON (the correlator alone writes it, by compare-and-swap),
`route.<alert_route>` → run id, `start.<message>` → the StartPlan of one `run.start`.
Once a run is recorded, `forget` removes its scratch keys (see `scratch_keys`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sreforge_bus import (
    ORACLE_HANDOFF,
    ROUTE_KEYS,
    RUNNER_CLAIM,
    CasConflict,
    Lease,
    RunOwner,
    RunStateUnreadable,
    RunStore,
    host_lease_key,
    once_key,
    oracle_samples_keys,
    parse_run_state,
    route_key,
    run_owner_key,
    run_state_key,
    start_key,
)
from sreforge_contracts import RUN_ID_PATTERN, RunState

from sreforge_correlator._errors import RunStateError
from sreforge_correlator._start import StartPlan

__all__ = ["Change", "RunLedger"]

_RUN_KEY = re.compile(RUN_ID_PATTERN)
_CAS_ATTEMPTS = 50


@dataclass(frozen=True)
class Change:
    """A run's state before and after one transition (the same object when nothing changed)."""

    before: RunState
    after: RunState

    @property
    def changed(self) -> bool:
        """True when the transition wrote a new state."""
        return self.after is not self.before


class RunLedger:
    """Run state over a `RunStore`, every write a create-as-claim or a compare-and-swap."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    async def plan(self, message: str, fresh: StartPlan) -> StartPlan:
        """The plan of one `run.start`: `fresh` on its first delivery, else the kept one."""
        key = start_key(message)
        if await self._store.claim(key, fresh.model_dump_json().encode()):
            return fresh
        entry = await self._store.get(key)
        if entry is None:
            raise RunStateError(f"start plan {key!r} vanished right after it was claimed")
        return StartPlan.model_validate_json(entry.value)

    async def create(self, state: RunState) -> bool:
        """Create the run's state; False when the run id is already taken."""
        key = run_state_key(state.run_id)
        return await self._store.claim(key, state.model_dump_json().encode())

    async def load(self, run_id: str) -> RunState | None:
        """The run's current state, or None when there is no such run."""
        entry = await self._store.get(run_state_key(run_id))
        return None if entry is None else _parse(run_id, entry.value)

    async def change(self, run_id: str, step: Callable[[RunState], RunState]) -> Change | None:
        """Apply `step` to the run's state by compare-and-swap, retrying on conflict.

        None when the run does not exist. `step` must be pure: it is re-run on
        the fresh state after every conflict.
        """
        for _ in range(_CAS_ATTEMPTS):
            entry = await self._store.get(run_state_key(run_id))
            if entry is None:
                return None
            before = _parse(run_id, entry.value)
            after = step(before)
            if after is before or after == before:
                return Change(before, before)
            try:
                await self._store.update(
                    entry.key, after.model_dump_json().encode(), entry.revision
                )
            except CasConflict:
                continue
            return Change(before, after)
        raise RunStateError(f"run {run_id}: state kept changing; {_CAS_ATTEMPTS} CAS attempts lost")

    async def index_route(self, route: str, run_id: str) -> None:
        """Remember which run owns `route`."""
        await self._store.put(route_key(route), run_id.encode())

    async def run_of_route(self, route: str) -> str | None:
        """The run that owns `route`, or None."""
        entry = await self._store.get(route_key(route))
        return None if entry is None else entry.value.decode()

    async def owner(self, run_id: str) -> RunOwner | None:
        """The worker host that took the run (None: no worker host took it, e.g. embedded)."""
        entry = await self._store.get(run_owner_key(run_id))
        return RunOwner.parse(entry.value) if entry else None

    async def lease(self, host: str) -> Lease | None:
        """Worker host `host`'s lease as stored (None: it holds none)."""
        entry = await self._store.get(host_lease_key(host))
        return Lease.parse(entry.value) if entry else None

    async def run_ids(self) -> list[str]:
        """Every run id with state: the server lists only dot-free keys (no run id has a dot),
        so the services' many dotted keys cost this listing nothing."""
        keys = await self._store.keys("*", with_removed=True)  # each is loaded next
        return [key for key in keys if _RUN_KEY.fullmatch(key)]

    async def forget(self, state: RunState) -> list[str]:
        """Remove the scratch keys of a recorded run; return those that were there.

        Idempotent, and writes nothing for a key already gone (a purge of an absent
        key would still leave a marker). The route is removed only while it names
        this run.
        """
        removed = []
        for key in await self.scratch_keys(state):
            entry = await self._store.get(key)
            if entry is None:
                continue
            if key.startswith(f"{ROUTE_KEYS}.") and entry.value.decode() != state.run_id:
                continue
            await self._store.remove(key)
            removed.append(key)
        return removed

    async def scratch_keys(self, state: RunState) -> list[str]:
        """The run's keys that nothing reads once it is recorded.

        `route.<route>` (a terminal run ignores its triggers), `runner.<run>` (the runner
        skips a terminal run before its claim), `oracle.handoff.<run>` and
        `oracle.samples.<run>.<n>` (only a grading in progress resumes from them; the
        oracle's one outcome, `oracle.scored.<run>`, is kept). Kept on purpose: the run
        state, `recorded.<run>`, `oracle.scored.<run>` and `deployer.*.<run>` guard
        against a late redelivery (the deployer cleans up after the record), and
        `start.<message>` is keyed by message, not by run.
        """
        run = state.run_id
        samples = await self._store.keys(oracle_samples_keys(run), with_removed=True)
        owned = [once_key(RUNNER_CLAIM, run), once_key(ORACLE_HANDOFF, run)]
        return [route_key(state.alert_route), *owned, *samples]


def _parse(run_id: str, value: bytes) -> RunState:
    try:
        return parse_run_state(run_id, value)
    except RunStateUnreadable as error:
        raise RunStateError(str(error)) from None
