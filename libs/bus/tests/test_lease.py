"""A worker host's lease: how it is taken, kept and lost, and how it fences a stale host."""

from __future__ import annotations

import pytest
from sreforge_bus import (
    Bus,
    Fenced,
    HostLease,
    Lease,
    LeaseHeld,
    RunOwner,
    decide_acquire,
    host_lease_key,
    owner_lost,
    run_owner_key,
)

T = 1_000_000.0


class Clock:
    """A settable wall clock (seconds) shared by the leases of one test."""

    def __init__(self) -> None:
        self.now = T

    def __call__(self) -> float:
        return self.now


def lease(lease_id: str = "a1", expires_at: float = T + 10) -> Lease:
    """Host `h1`'s lease as stored."""
    return Lease("h1", lease_id, expires_at, 10.0)


@pytest.mark.parametrize(
    ("current", "now", "decision"),
    [
        (None, T, "create"),
        (lease(expires_at=T + 1), T, "held"),
        (lease(expires_at=T), T, "take"),
        (lease(expires_at=T - 5), T, "take"),
    ],
)
def test_a_starting_host_creates_takes_over_or_refuses_the_lease(
    current: Lease | None, now: float, decision: str
) -> None:
    """Only an expired (or absent) lease may be taken: a live one means a second worker
    was started under the same name, which would otherwise fence the first."""
    assert decide_acquire(current, now) == decision


@pytest.mark.parametrize(
    ("stored", "now", "lost"),
    [
        (lease(), T, None),
        (None, T, "holds no lease"),
        (lease(expires_at=T - 2.5), T, "stopped renewing its lease (2.5s past expiry)"),
        (lease("b2"), T, "restarted under a new lease"),
    ],
)
def test_a_run_loses_its_host_when_the_owners_lease_is_gone_expired_or_retaken(
    stored: Lease | None, now: float, lost: str | None
) -> None:
    """A host restarted under its old name is a new tenure: the old runs' stacks are gone."""
    why = owner_lost(RunOwner("h1", "a1"), stored, now)
    assert why is None if lost is None else lost in (why or "")


def test_a_stored_lease_and_owner_read_back_and_garbage_reads_as_none() -> None:
    """Anything unreadable in the key is no lease (so it can be taken over)."""
    assert Lease.parse(lease().to_bytes()) == lease()
    assert RunOwner.parse(RunOwner("h1", "a1").to_bytes()) == RunOwner("h1", "a1")
    assert Lease.parse(b"{}") is None
    assert RunOwner.parse(b"not json") is None


def test_a_host_name_must_fit_durables_and_keys() -> None:
    """The name ends durable names (`deployer-submitted-<host>`) and run-store keys."""
    with pytest.raises(ValueError, match="must match"):
        HostLease("Host.A", 5)


@pytest.mark.integration
async def test_a_second_process_under_a_live_hosts_name_is_refused(bus: Bus) -> None:
    """Two workers named alike would own each other's runs."""
    clock = Clock()
    first = HostLease("h1", 10, clock)
    await first.acquire(bus.runs)
    with pytest.raises(LeaseHeld, match="is held by lease"):
        await HostLease("h1", 10, clock).acquire(bus.runs)
    assert first.live()


@pytest.mark.integration
async def test_a_lease_taken_over_fences_the_stale_holder_for_good(bus: Bus) -> None:
    """The stale host's revision-checked renewal fails, and it never touches a run again,
    even though its own clock would still call the lease live."""
    clock = Clock()
    stale = HostLease("h1", 10, clock)
    await stale.acquire(bus.runs)
    clock.now += 11  # stale stopped renewing (a pause, a partition)
    assert not stale.live()
    fresh = HostLease("h1", 10, clock)
    await fresh.acquire(bus.runs)
    clock.now -= 10  # even where the stale host's clock lags, the CAS catches it
    with pytest.raises(Fenced, match="fenced"):
        await stale.renew(bus.runs)
    assert not stale.live()
    assert stale.fenced() is not None
    await fresh.renew(bus.runs)
    assert fresh.live()


@pytest.mark.integration
async def test_renewals_keep_the_lease_and_expiry_without_one_fences(bus: Bus) -> None:
    """Renewing moves the expiry on; a host whose renewals stopped getting through is
    fenced once its last expiry passes, before anyone took its lease."""
    clock = Clock()
    host = HostLease("h1", 10, clock)
    await host.acquire(bus.runs)
    clock.now += 8
    await host.renew(bus.runs)
    clock.now += 8
    assert host.live()
    stored = await bus.runs.get(host_lease_key("h1"))
    assert stored is not None
    assert Lease.parse(stored.value) == Lease("h1", host.lease_id, T + 18, 10)
    clock.now += 3
    assert not host.live()
    with pytest.raises(Fenced, match="expired before a renewal"):
        await host.renew(bus.runs)


@pytest.mark.integration
async def test_a_run_is_owned_by_the_first_host_to_take_it(bus: Bus) -> None:
    """Only one host ever owns a run; the other sees who does and leaves it alone."""
    clock = Clock()
    one, two = HostLease("h1", 10, clock), HostLease("h2", 10, clock)
    await one.acquire(bus.runs)
    await two.acquire(bus.runs)
    assert await one.take_run(bus.runs, "run-1") is None
    assert await one.take_run(bus.runs, "run-1") is None  # a redelivery: still ours
    assert await two.take_run(bus.runs, "run-1") == one.owner()
    assert await one.owns(bus.runs, "run-1")
    assert not await two.owns(bus.runs, "run-1")
    stored = await bus.runs.get(run_owner_key("run-1"))
    assert stored is not None
    assert RunOwner.parse(stored.value) == one.owner()


@pytest.mark.integration
async def test_a_released_lease_ends_at_once(bus: Bus) -> None:
    """A clean stop releases the lease, so its runs fail now rather than after the TTL."""
    clock = Clock()
    host = HostLease("h1", 10, clock)
    await host.acquire(bus.runs)
    await host.release(bus.runs)
    stored = await bus.runs.get(host_lease_key("h1"))
    assert stored is not None
    assert owner_lost(host.owner(), Lease.parse(stored.value), clock()) is not None
    assert not host.live()
