"""A worker host's lease and its runs' owners: who may touch a run's stack, and until when.

A host holds `deployer.host.<host>` = {host, lease id, expires at}. It takes the key
with `create` (or takes over a lease that expired), renews it with a revision-checked
`update` every third of its TTL, and is *fenced* the moment a renewal finds another
revision (someone took the lease) or its own expiry passes unrenewed: a fenced host
touches none of its runs again (peers-2026 §4.2: an ack arriving after AckWait may be
taken for another worker's attempt, so the lease, not the message, decides). A run's
owner `deployer.owner.<run_id>` = {host, lease id} is created once; a run whose owner's
lease is gone, expired or re-taken under another id has lost its host.

The decisions are pure (`decide_acquire`, `owner_lost`); `HostLease` does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import structlog

from sreforge_bus._connection import Bus
from sreforge_bus._errors import BusError, CasConflict, RunStoreError
from sreforge_bus._names import HOST_PATTERN, host_lease_key, run_owner_key
from sreforge_bus._runs import RunStore

__all__ = [
    "Fenced",
    "HostLease",
    "Lease",
    "LeaseHeld",
    "RunOwner",
    "decide_acquire",
    "owner_lost",
]

log = structlog.get_logger("sreforge.bus.lease")
_HOST = re.compile(HOST_PATTERN)


class LeaseHeld(BusError):
    """Another live process holds this host's lease (two workers started with one name)."""


class Fenced(BusError):
    """This host's lease expired unrenewed or was taken: it must not touch its runs again."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker host's lease as stored: `lease_id` names one process's tenure."""

    host: str
    lease_id: str
    expires_at: float
    """Unix seconds (worker hosts and the correlator need clocks in step, e.g. NTP)."""
    ttl_s: float

    def to_bytes(self) -> bytes:
        """The stored form (JSON)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, value: bytes) -> Lease | None:
        """The stored lease, or None when the value is not one (a released or foreign key)."""
        try:
            raw = json.loads(value)
            return cls(str(raw["host"]), str(raw["lease_id"]), float(raw["expires_at"]),
                       float(raw["ttl_s"]))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None

    def live(self, now: float) -> bool:
        """Whether the lease still holds at `now`."""
        return now < self.expires_at


@dataclass(frozen=True, slots=True)
class RunOwner:
    """The host (and its lease's tenure) that owns a run's stack to the end."""

    host: str
    lease_id: str

    def to_bytes(self) -> bytes:
        """The stored form (JSON)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, value: bytes) -> RunOwner | None:
        """The stored owner, or None when the value is not one."""
        try:
            raw = json.loads(value)
            return cls(str(raw["host"]), str(raw["lease_id"]))
        except (ValueError, KeyError, TypeError):
            return None


Acquire = Literal["create", "take", "held"]


def decide_acquire(current: Lease | None, now: float) -> Acquire:
    """How a starting host gets its lease: `create` it (none stored), `take` it over (the
    stored one expired, or is unreadable), or not at all (`held`: another process's lease
    still holds; starting a second worker under one name would fence the first)."""
    if current is None:
        return "create"
    return "held" if current.live(now) else "take"


def owner_lost(owner: RunOwner, lease: Lease | None, now: float) -> str | None:
    """Why the run's owning host is gone (its lease released, expired or re-taken by a
    newer process under the same name), or None while it holds."""
    if lease is None:
        return f"worker host {owner.host!r} holds no lease (it stopped or never renewed)"
    if lease.lease_id != owner.lease_id:
        return f"worker host {owner.host!r} restarted under a new lease; the run's stack is gone"
    if not lease.live(now):
        ago = now - lease.expires_at
        return f"worker host {owner.host!r} stopped renewing its lease ({ago:.1f}s past expiry)"
    return None


class HostLease:
    """This process's lease on worker host `host`: acquire, keep renewed, release.

    `live()` is the fence every pinned handler consults before it touches a run: False
    once a renewal lost the lease or the last good renewal's expiry has passed.
    """

    def __init__(self, host: str, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        if not _HOST.match(host):
            raise ValueError(f"worker host {host!r} must match {HOST_PATTERN}")
        if ttl_s <= 0:
            raise ValueError(f"lease TTL of {host!r} must be positive, got {ttl_s}")
        self.host = host
        self.ttl_s = ttl_s
        self.lease_id = uuid.uuid4().hex
        self._clock = clock
        self._revision: int | None = None
        self._expires_at = 0.0
        self._fenced: str | None = None

    @property
    def key(self) -> str:
        """The lease's run-store key."""
        return host_lease_key(self.host)

    def owner(self) -> RunOwner:
        """What this host writes as the owner of a run it takes."""
        return RunOwner(self.host, self.lease_id)

    def live(self) -> bool:
        """Whether this host may still touch its runs (held, unexpired, not fenced)."""
        return (
            self._fenced is None
            and self._revision is not None
            and (self._clock() < self._expires_at)
        )

    def fenced(self) -> str | None:
        """Why this host is fenced, or None."""
        if self._fenced is None and self._revision is not None and not self.live():
            self._fenced = "its lease expired before a renewal got through"
        return self._fenced

    def _lease(self, now: float) -> Lease:
        return Lease(self.host, self.lease_id, now + self.ttl_s, self.ttl_s)

    async def acquire(self, store: RunStore) -> None:
        """Take the lease (create, or take over an expired one); `LeaseHeld` if it is live."""
        for _ in range(3):  # a racing taker only makes us look again
            entry = await store.get(self.key)
            current = Lease.parse(entry.value) if entry else None
            now = self._clock()
            decision = decide_acquire(current, now)
            if decision == "held" and current is not None:
                raise LeaseHeld(
                    f"worker host {self.host!r} is held by lease {current.lease_id} for "
                    f"{current.expires_at - now:.1f}s more; is another worker running as it?"
                )
            lease = self._lease(now)
            if entry is None:
                if await store.claim(self.key, lease.to_bytes()):
                    self._held(await self._revision_of(store), lease)
                    return
                continue
            try:
                self._held(await store.update(self.key, lease.to_bytes(), entry.revision), lease)
                return
            except CasConflict:
                continue
        raise LeaseHeld(f"worker host {self.host!r}: its lease kept changing while taking it")

    async def _revision_of(self, store: RunStore) -> int:
        entry = await store.get(self.key)
        found = Lease.parse(entry.value) if entry else None
        if entry is None or found is None or found.lease_id != self.lease_id:
            raise RunStoreError(f"lease {self.key} changed hands right after it was created")
        return entry.revision

    def _held(self, revision: int, lease: Lease) -> None:
        self._revision = revision
        self._expires_at = lease.expires_at
        log.info("lease.held", host=self.host, lease_id=self.lease_id, ttl_s=self.ttl_s)

    async def renew(self, store: RunStore) -> None:
        """Extend the lease by one TTL, only if nobody wrote it since our last write.

        A lost compare-and-swap fences this host for good (raises `Fenced`); a renewal
        the bus did not answer is retried by the caller until the expiry fences it.
        """
        if (why := self.fenced()) is not None or self._revision is None:
            raise Fenced(f"worker host {self.host!r} is fenced: {why or 'no lease held'}")
        lease = self._lease(self._clock())
        try:
            self._revision = await store.update(self.key, lease.to_bytes(), self._revision)
        except CasConflict:
            self._fenced = "another process took its lease"
            raise Fenced(f"worker host {self.host!r} is fenced: {self._fenced}") from None
        self._expires_at = lease.expires_at

    async def keep(self, bus: Bus, stopping: asyncio.Event) -> None:
        """Renew every third of the TTL until `stopping`; raises `Fenced` (ending the
        service, so the process stops) once this host lost its lease."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.ttl_s / 3)
            if stopping.is_set():
                return
            try:
                await self.renew(bus.runs)
            except RunStoreError as error:  # no answer (a node failing over): try again
                log.warning("lease.renew_failed", host=self.host, error=repr(error))
                if (why := self.fenced()) is not None:
                    raise Fenced(f"worker host {self.host!r} is fenced: {why}") from error

    async def release(self, store: RunStore) -> None:
        """Give the lease up (a clean stop): its unfinished runs are failed at once."""
        if self._revision is None or self._fenced is not None:
            return
        gone = Lease(self.host, self.lease_id, 0.0, self.ttl_s)
        with contextlib.suppress(RunStoreError):
            await store.update(self.key, gone.to_bytes(), self._revision)
        self._fenced = "it released its lease"

    async def take_run(self, store: RunStore, run_id: str) -> RunOwner | None:
        """Make this host the run's owner; the owner it already has when that is another
        host (or another tenure of this one): None when this host owns it now."""
        mine = self.owner()
        if await store.claim(run_owner_key(run_id), mine.to_bytes()):
            return None
        entry = await store.get(run_owner_key(run_id))
        found = RunOwner.parse(entry.value) if entry else None
        if found is None or found == mine:
            return None if found == mine else RunOwner("?", "?")
        return found

    async def owns(self, store: RunStore, run_id: str) -> bool:
        """Whether this host's current tenure owns run `run_id`."""
        entry = await store.get(run_owner_key(run_id))
        return entry is not None and RunOwner.parse(entry.value) == self.owner()
