"""Worker mode: which route reads which durable, and who may act on a run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import structlog
from sreforge_bus import (
    WORK_DURABLE,
    Bus,
    ConsumerSpec,
    Context,
    Delivery,
    Fenced,
    HostLease,
    Route,
    Service,
    bootstrap,
)
from sreforge_bus.testing import read_stream
from sreforge_contracts import (
    Event,
    Recorded,
    RunFailed,
    RunRequested,
    RunStartReply,
    parse_event,
)
from sreforge_correlator import CorrelatorService, CorrelatorSettings
from sreforge_correlator._settings import default_use_cases
from sreforge_recorder import RecorderSettings, recorder_service

from sreforge._engine import load_services
from sreforge._workers import pinned_durables, worker_services
from sreforge.campaign._outcome import lost_its_host
from sreforge.campaign._store import Result
from sreforge.cli import SERVICE_NAMES

SCENARIO = "latency-cache-stampede"


def test_a_hosts_pinned_services_read_their_own_durables_and_the_work_queue() -> None:
    """The permissions are rendered from this list, so it must match what workers read."""
    services = {service.name: service for service in load_services(SERVICE_NAMES)}
    assert pinned_durables(services["deployer"], "a") == [
        WORK_DURABLE,
        "deployer-submitted-a",
        "deployer-scored-a",
        "deployer-cleanup-a",
    ]
    assert pinned_durables(services["runner"], "a") == ["runner-a"]
    assert pinned_durables(services["correlator"], "a") == [
        route.consumer.durable for route in services["correlator"].routes
    ]
    lease = HostLease("a", 5)
    workers = {s.name: s for s in worker_services(list(services.values()), lease, 3)}
    assert workers["correlator"] is services["correlator"]
    assert workers["recorder"] is services["recorder"]
    for name in ("context", "runner", "deployer", "oracle"):
        specs = [route.consumer for route in workers[name].routes]
        assert [spec.durable for spec in specs] == pinned_durables(services[name], "a")
        assert all(spec.deliver_new for spec in specs if spec.durable != WORK_DURABLE)
    [work] = [r for r in workers["deployer"].routes if r.consumer.durable == WORK_DURABLE]
    assert (work.consumer.stream, work.concurrency) == ("SREFORGE_WORK", 3)
    assert lease.keep in workers["deployer"].tasks


class Calls:
    """A handler that counts the runs it was asked to act on."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def __call__(self, event: Event, context: Context) -> Sequence[Event]:
        assert event.run_id is not None
        self.runs.append(event.run_id)
        return ()


def _context(bus: Bus) -> Context:
    delivery = Delivery(subject="sreforge.run.r.X", data=b"")
    return Context(bus=bus, delivery=delivery, log=structlog.get_logger("test"))


def _event(kind: type[Event], run_id: str) -> Event:
    if kind is RunRequested:
        return RunRequested(run_id=run_id, producer="correlator", scenario="s", agent="noop",
                            time_scale=0.1, alert_route="r" * 32)  # fmt: skip
    return RunFailed(run_id=run_id, producer="runner", stage="runner", reason="x",
                     verdict="error")  # fmt: skip


def _pinned_pair(calls: Calls, lease: HostLease) -> tuple[Route[Event], Route[Event]]:
    """A service of one work route and one pinned route, as worker `lease.host` runs it."""
    stack = ConsumerSpec("deployer-stack", ("sreforge.run.*.RunRequested",))
    failed = ConsumerSpec("deployer-failed", ("sreforge.run.*.RunFailed",))
    routes = (Route.on(stack, RunRequested, calls), Route.on(failed, RunFailed, calls))
    service = Service(name="deployer", routes=routes)
    [worker] = worker_services([service], lease, 1)
    work, pinned = worker.routes
    return work, pinned


@pytest.mark.integration
async def test_only_the_host_that_took_a_run_acts_on_its_later_events(bus: Bus) -> None:
    """Host a takes the run from the queue; b's copy of the same request and of its
    later event does nothing; a fenced a takes no new run and touches its old one no more."""
    await bootstrap(bus)
    calls_a, calls_b = Calls(), Calls()
    lease_a, lease_b = HostLease("a", 30), HostLease("b", 30)
    await lease_a.acquire(bus.runs)
    await lease_b.acquire(bus.runs)
    work_a, pinned_a = _pinned_pair(calls_a, lease_a)
    work_b, pinned_b = _pinned_pair(calls_b, lease_b)
    context = _context(bus)
    await work_a.handler(_event(RunRequested, "run-1"), context)
    await work_b.handler(_event(RunRequested, "run-1"), context)  # a duplicate delivery
    await pinned_a.handler(_event(RunFailed, "run-1"), context)
    await pinned_b.handler(_event(RunFailed, "run-1"), context)
    assert (calls_a.runs, calls_b.runs) == (["run-1", "run-1"], [])
    lease_a._fenced = "another process took its lease"  # as a lost renewal leaves it
    with pytest.raises(Fenced):
        await work_a.handler(_event(RunRequested, "run-2"), context)
    await pinned_a.handler(_event(RunFailed, "run-1"), context)
    assert calls_a.runs == ["run-1", "run-1"]


def test_a_trial_is_rerun_only_when_its_worker_host_died() -> None:
    """Any other `error` (no record, an engine fault) waits for a resume, as before."""

    def result(verdict: str, reason: str | None) -> Result:
        return Result(agent="reference", scenario="s", trial=1, run_id="r", verdict=verdict,
                      score=None, time_to_clear_s=None, tokens=None, cost_usd=None, wall_s=1.0,
                      record=None, reason=reason)  # fmt: skip

    assert lost_its_host(result("error", "worker: worker host 'a' stopped renewing its lease"))
    assert not lost_its_host(result("error", "no record (error): following the run failed"))
    assert not lost_its_host(result("failed", "worker: worker host 'a' ..."))


@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_a_run_whose_host_died_ends_error_with_exactly_one_record(
    bus: Bus, tmp_path: Path
) -> None:
    """The host took the run and died (it never renews): the correlator fails the run,
    the recorder writes one schema-valid record, verdict `error`, naming the host."""
    settings = CorrelatorSettings(use_cases=default_use_cases(), sweep_interval_seconds=0.05)
    (tmp_path / "use-cases" / "bookshelf" / "scenarios" / SCENARIO).mkdir(parents=True)
    recording = RecorderSettings(runs_dir=tmp_path / "runs", records_root=tmp_path / "use-cases",
                                 store_dir=tmp_path / "store", bank=False)  # fmt: skip
    services = [CorrelatorService(settings=settings), recorder_service(recording)]
    await bootstrap(bus, [route.consumer for service in services for route in service.routes])
    stop = asyncio.Event()
    tasks = [asyncio.create_task(service.run(bus, stop)) for service in services]
    try:
        body = {"scenario": SCENARIO, "agent": "reference", "time_scale": 0.1}
        answer = await bus.command("sreforge.run.start", json.dumps(body).encode(), timeout=10)
        run_id = RunStartReply.model_validate_json(answer).run_id
        assert run_id is not None
        host = HostLease("a", 0.5)
        await host.acquire(bus.runs)
        assert await host.take_run(bus.runs, run_id) is None
        [message] = await read_stream(bus, f"sreforge.run.{run_id}.Recorded", 1, timeout=20)
        recorded = parse_event(message.data)
        assert isinstance(recorded, Recorded)
        assert recorded.verdict == "error"
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    records = list((tmp_path / "runs").glob("*/record.json"))
    assert [path.parent.name for path in records] == [run_id]
    record = json.loads(records[0].read_text())
    assert record["verdict"] == "error"
    assert "worker host 'a'" in json.dumps(record)
