"""KV helpers over the `sreforge-runs` bucket: create-as-claim, compare-and-swap, the one
run-state reader and once-per-run claims."""

from __future__ import annotations

from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import ValidationError
from sreforge_contracts import RunState

from sreforge_bus._errors import CasConflict, RunStateUnreadable, RunStoreError
from sreforge_bus._names import RUNS_BUCKET, run_state_key
from sreforge_bus._once import Once

__all__ = ["Entry", "RunStore", "parse_run_state"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One key's current value and the revision to pass to `RunStore.update`."""

    key: str
    value: bytes
    revision: int


class RunStore:
    """Run state in the KV bucket `sreforge-runs` (created by `bootstrap`).

    `claim` makes "who acts on this" a single atomic decision; `update` is a
    compare-and-swap so two workers can never both advance the same run.
    """

    def __init__(self, js: JetStreamContext, bucket: str = RUNS_BUCKET) -> None:
        self._js = js
        self._bucket = bucket
        self._kv: KeyValue | None = None

    async def _store(self) -> KeyValue:
        if self._kv is None:
            try:
                self._kv = await self._js.key_value(self._bucket)
            except nats.js.errors.BucketNotFoundError as err:
                raise RunStoreError(
                    f"KV bucket {self._bucket!r} does not exist; run bootstrap() first"
                ) from err
        return self._kv

    async def run_state(self, run_id: str) -> RunState | None:
        """The run's state, or None when there is no such run.

        Raises `RunStateUnreadable` (a `ValueError`) when the stored value is no `RunState`.
        """
        entry = await self.get(run_state_key(run_id))
        return None if entry is None else parse_run_state(run_id, entry.value)

    def once(self, owner: str, run_id: str) -> Once:
        """`owner`'s once-per-run claim on `run_id` (key `<owner>.<run_id>`)."""
        return Once(self, owner, run_id)

    async def claim(self, key: str, value: bytes) -> bool:
        """Create `key` only if it is absent: True if this call created it, False if it existed."""
        kv = await self._store()
        try:
            await kv.create(key, value)
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"claim of run store key {key!r} failed: {err!r}") from err
        return True

    async def get(self, key: str) -> Entry | None:
        """Return the current entry for `key`, or None when it is absent or deleted."""
        kv = await self._store()
        try:
            found = await kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"get of run store key {key!r} failed: {err!r}") from err
        return Entry(key=key, value=found.value or b"", revision=found.revision or 0)

    async def update(self, key: str, value: bytes, revision: int) -> int:
        """Write `value` only if `key` is still at `revision`; return the new revision.

        Raises `CasConflict` when someone else wrote the key since `revision`.
        """
        kv = await self._store()
        try:
            return await kv.update(key, value, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError as err:
            raise CasConflict(key, revision) from err
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"update of run store key {key!r} failed: {err!r}") from err

    async def put(self, key: str, value: bytes) -> int:
        """Write `value` unconditionally and return the new revision."""
        kv = await self._store()
        try:
            return await kv.put(key, value)
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"put of run store key {key!r} failed: {err!r}") from err

    async def keys(self, pattern: str = ">", *, with_removed: bool = False) -> list[str]:
        """Return the live keys matching `pattern`, sorted (empty list when there are none).

        `pattern` is a subject filter the server applies: `*` matches one dot-free
        token, `>` the rest (`"*"`: keys without a dot; `"oracle.samples.r1.*"`).

        `with_removed` also lists keys whose last write removed them, for a caller that
        reads each key anyway: it asks the bucket's stream leader (one request) instead of
        watching through an ephemeral consumer, which on a cluster that lost a node may be
        placed on the lost node and never answer.
        """
        if with_removed:
            return await self._subjects(pattern)
        kv = await self._store()
        try:
            watcher = await kv.watch(pattern, meta_only=True, ignore_deletes=True)
            try:
                found = []
                async for entry in watcher:
                    if entry is None:  # the end of what is stored now
                        break
                    found.append(entry.key)
            finally:
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves it untyped
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"listing run store keys {pattern!r} failed: {err!r}") from err
        return sorted(found)

    async def _subjects(self, pattern: str) -> list[str]:
        prefix = f"$KV.{self._bucket}."
        try:
            info = await self._js.stream_info(
                f"KV_{self._bucket}", subjects_filter=prefix + pattern
            )
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"listing run store keys {pattern!r} failed: {err!r}") from err
        return sorted(subject.removeprefix(prefix) for subject in info.state.subjects or {})

    async def remove(self, key: str) -> None:
        """Remove `key` and its history (a purge: one small marker stays until it ages out)."""
        kv = await self._store()
        try:
            await kv.purge(key)
        except (nats.errors.Error, TimeoutError) as err:
            raise RunStoreError(f"removal of run store key {key!r} failed: {err!r}") from err


def parse_run_state(run_id: str, value: bytes) -> RunState:
    """Read a stored run state; `RunStateUnreadable` (a `ValueError`) when it is none."""
    try:
        return RunState.model_validate_json(value)
    except ValidationError as error:
        raise RunStateUnreadable(f"run {run_id}: stored state is not a RunState: {error}") from None
