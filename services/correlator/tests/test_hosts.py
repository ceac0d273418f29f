"""A run whose worker host died ends `error`, once, and nothing waits for the dead host."""

from __future__ import annotations

import time

import pytest
from sreforge_bus import STREAM, Bus, HostLease, Lease, RunOwner, host_lease_key, run_owner_key
from sreforge_bus.testing import poll, read_stream
from sreforge_contracts import RunFailed, parse_event
from sreforge_correlator import CorrelatorService, fold
from sreforge_correlator._hosts import host_lost, host_lost_again

from .conftest import CLOCK, RUN_ID, at, requested, run_state, stack_ready, start_run

OWNER = RunOwner("host-a", "lease-1")


def _lease(expires_in: float, lease_id: str = "lease-1") -> Lease:
    return Lease("host-a", lease_id, at(expires_in).timestamp(), 5.0)


def test_a_live_run_of_an_expired_host_fails_with_verdict_error() -> None:
    """The reason names the host, what happened to its lease and where the run was."""
    state = fold(requested(), stack_ready(), CLOCK)
    failed = host_lost(state, OWNER, _lease(-3), at(0))
    assert failed is not None
    assert (failed.stage, failed.verdict, failed.event_id) == (
        "worker",
        "error",
        f"{RUN_ID}.RunFailed.worker",
    )
    assert "'host-a' stopped renewing its lease" in failed.reason
    assert failed.reason.endswith("while the run was stack_ready")


@pytest.mark.parametrize(
    ("owner", "lease"),
    [(None, None), (OWNER, _lease(3))],
    ids=["no-worker-took-it", "host-alive"],
)
def test_a_run_with_no_owner_or_a_live_host_is_left_alone(
    owner: RunOwner | None, lease: Lease | None
) -> None:
    """The embedded engine writes no owner: nothing changes for it."""
    assert host_lost(requested(), owner, lease, at(0)) is None


def test_an_ended_run_is_not_failed_again_but_its_failure_is_owed_again() -> None:
    """A correlator that died between its CAS and its publish re-announces the same event."""
    failed = host_lost(requested(), OWNER, None, at(0))
    assert failed is not None
    ended = fold(requested(), failed, CLOCK)
    assert host_lost(ended, OWNER, None, at(1)) is None
    again = host_lost_again(ended)
    assert again is not None
    assert (again.event_id, again.reason) == (failed.event_id, failed.reason)


@pytest.mark.integration
async def test_a_host_that_stops_renewing_fails_its_run_once_with_the_reason(
    bus: Bus, correlator: CorrelatorService
) -> None:
    """The host took the run, then died (no renewal): the sweep fails the run, `error`,
    with exactly one RunFailed, and the run is `failed` in KV."""
    reply = await start_run(bus)
    assert reply.run_id is not None
    host = HostLease("host-a", 0.5)
    await host.acquire(bus.runs)
    assert await host.take_run(bus.runs, reply.run_id) is None
    started = time.monotonic()
    [message] = await read_stream(bus, f"sreforge.run.{reply.run_id}.RunFailed", 1)
    failed = parse_event(message.data)
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("worker", "error")
    assert "'host-a' stopped renewing its lease" in failed.reason
    assert time.monotonic() - started < 5, "the sweep should notice within the TTL + a sweep"

    async def failed_state() -> bool:
        return (await run_state(bus, reply.run_id or "")).phase == "failed"

    await poll(failed_state, "the run to be failed in KV")
    # Its lease long gone, the failed run is not failed again (sweeps go on meanwhile).
    await bus.runs.put(host_lease_key("host-a"), _lease(-60).to_bytes())
    await poll(failed_state, "the run to stay failed")
    info = await bus.js.stream_info(STREAM, subjects_filter=f"sreforge.run.{reply.run_id}.>")
    assert info.state.subjects == {
        f"sreforge.run.{reply.run_id}.RunRequested": 1,
        f"sreforge.run.{reply.run_id}.RunFailed": 1,
    }
    assert (await bus.runs.get(run_owner_key(reply.run_id))) is not None
