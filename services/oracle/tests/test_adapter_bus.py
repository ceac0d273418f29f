"""The oracle service on a real bus, grading against a real Prometheus (100 ms scrape/eval).

Each test runs the service as the engine does (`service.run(bus, stop)`), with the
run's state in KV pointing at the conftest Prometheus and a scenario manifest in a
temporary use-cases root, at time scale 0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import pytest
from sreforge_bus import STREAM, Bus, ConsumerSpec, bootstrap
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import (
    AgentContext,
    BriefReady,
    CiResult,
    Deployed,
    EvalOnly,
    Event,
    RunContract,
    RunFailed,
    RunState,
    RunWorkspace,
    ScenarioRef,
    Scored,
    SliSample,
    StackInfo,
    Submission,
    Submitted,
    parse_event,
)
from sreforge_oracle import (
    DEPLOYED_CONSUMER,
    GradingInterrupted,
    GradingSample,
    OracleService,
    OracleSettings,
    PrometheusProbe,
    RunJournal,
    history_samples,
    oracle_service,
)
from sreforge_oracle import _history as history
from sreforge_oracle._history import MAX_POINTS

pytestmark = pytest.mark.integration

TIME_SCALE = 0.1
GAP_LIMIT = 0.3  # 3 x the 0.1 s probe interval (1 s x scale, = the test eval interval)
LOAD = ('sum(loadgen_target_rps{job="loadgen"})', 'sum(loadgen_achieved_rps{job="loadgen"})')
ACK_WAIT = 2.0
FAST_DEPLOYED = ConsumerSpec(
    DEPLOYED_CONSUMER.durable,
    DEPLOYED_CONSUMER.filter_subjects,
    max_deliver=DEPLOYED_CONSUMER.max_deliver,
    ack_wait=ACK_WAIT,
)

ORACLE_PROCESS = """\
import asyncio, sys
from sreforge_bus import ConsumerSpec, connect
from sreforge_oracle import DEPLOYED_CONSUMER, oracle_service

async def main() -> None:
    bus = await connect(sys.argv[1], name="oracle-under-test")
    spec = ConsumerSpec(DEPLOYED_CONSUMER.durable, DEPLOYED_CONSUMER.filter_subjects,
                        max_deliver=DEPLOYED_CONSUMER.max_deliver, ack_wait=float(sys.argv[2]))
    await oracle_service(deployed=spec).run(bus, asyncio.Event())

asyncio.run(main())
"""


class Prometheus(Protocol):
    """The conftest Prometheus."""

    url: str


class UseCases(Protocol):
    """The temporary use-cases root of conftest."""

    root: Path

    def add(
        self, scenario_id: str, alert: str, *, sustained: float = 20, max_clear: float = 30
    ) -> Path: ...


def settings(use_cases: UseCases) -> OracleSettings:
    return OracleSettings(
        use_cases_dir=use_cases.root,
        load_target_promql=LOAD[0],
        load_achieved_promql=LOAD[1],
        load_warmup_seconds=0.2,
        checkpoint_seconds=0.2,
        prometheus_wait_seconds=0.5,
    )


async def put_run(
    bus: Bus, run_id: str, scenario: str, prometheus_url: str, alertmanager_url: str = ""
) -> None:
    """The run's state as the correlator keeps it: armed now, after the monitoring plane began."""
    endpoints = {"prometheus": prometheus_url}
    if alertmanager_url:
        endpoints["alertmanager"] = alertmanager_url
    state = RunState(
        run_id=run_id,
        scenario_id=scenario,
        agent="reference",
        time_scale=TIME_SCALE,
        alert_route=f"r-{run_id}",
        armed_at=datetime.now(UTC),
        stack=StackInfo(
            stack="oracle-test-stack",
            run_dir="/nonexistent",
            agent_endpoints={},
            operator_endpoints=endpoints,
        ),
    )
    await bus.runs.put(run_id, state.model_dump_json().encode())


def deployed(run_id: str, *, redeployed: bool = True, event_id: str = "") -> Deployed:
    return Deployed(
        run_id=run_id,
        event_id=event_id,
        producer="deployer",
        redeployed=redeployed,
        service="api",
        duration_ms=1.0,
        readiness="passed" if redeployed else "failed",
        error=None if redeployed else "the new build never became healthy",
    )


def brief(run_id: str, scenario: str) -> BriefReady:
    contract = RunContract(
        agent_context=AgentContext(
            services={}, run_workspace=RunWorkspace(path="/nonexistent", service="api")
        ),
        scenario=ScenarioRef(id=scenario, run_id=run_id),
        eval_only=EvalOnly(alert_to_clear="x", max_clear_time_seconds=1, sustained_clear_seconds=1),
    )
    return BriefReady(run_id=run_id, producer="context", page="# page", contract=contract)


def submitted(run_id: str, *, flag: bool) -> Submitted:
    submission = Submission(agent_name="reference", submitted=flag, duration_ms=1.0)
    return Submitted(run_id=run_id, producer="runner", submission=submission)


@contextlib.asynccontextmanager
async def serving(bus: Bus, service: OracleService) -> AsyncIterator[asyncio.Event]:
    """Run `service` until the block ends (or the test sets the yielded stop event)."""
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def outcome(bus: Bus, run_id: str, kind: str, timeout: float = 20) -> Event:  # noqa: ASYNC109
    [message] = await read_stream(bus, f"sreforge.run.{run_id}.{kind}", 1, timeout=timeout)
    return parse_event(message.data)


async def stored(bus: Bus, run_id: str, kind: str) -> int:
    """How many `kind` events of the run the stream holds."""
    subject = f"sreforge.run.{run_id}.{kind}"
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


@dataclass(frozen=True)
class Plane:
    """The conftest Prometheus (`url`) and Alertmanager: a run's monitoring plane."""

    url: str
    alertmanager: str


@pytest.fixture
async def warm(prometheus: Prometheus, alertmanager: str) -> Plane:
    """The conftest Prometheus once its rules fired and the load was scraped, and Alertmanager."""
    await target_firing(prometheus)
    return Plane(prometheus.url, alertmanager)


async def target_firing(prometheus: Prometheus) -> None:
    async with PrometheusProbe(prometheus.url, alert_name="TargetFiring", sli_promql=LOAD[0]) as p:

        async def firing() -> bool:
            sample = await p.sample(at=datetime.now(UTC), offset_seconds=0)
            return sample.target_state == "firing" and sample.load_achieved_rps is not None

        await poll(firing, "TargetFiring firing and the load scraped", timeout=15)


def assert_observed(series: list[SliSample], until: float) -> None:
    """The series covers [0, until] with no hole longer than the gap limit."""
    offsets = [sample.offset_seconds for sample in series]
    assert offsets == sorted(offsets)
    holes = [(a, b) for a, b in zip([0.0, *offsets], offsets, strict=False) if b - a > GAP_LIMIT]
    assert not holes, f"unobserved stretches {holes}"
    assert offsets[-1] >= until, f"series ends at {offsets[-1]}, the window at {until}"


async def test_a_quiet_target_passes_and_handoff_alerts_are_excused(
    bus: Bus, warm: Plane, use_cases: UseCases
) -> None:
    """Deployed → sampled → Scored passed; TargetFiring, firing at hand-off, is not 'new'."""
    use_cases.add("quiet", "NeverFires")
    await put_run(bus, "run-quiet", "quiet", warm.url, warm.alertmanager)
    async with serving(bus, oracle_service(settings(use_cases))):
        await bus.publish(brief("run-quiet", "quiet"))
        journal = RunJournal(bus.runs, "run-quiet")

        async def snapshot_taken() -> bool:
            return await journal.handoff() is not None

        await poll(snapshot_taken, "the hand-off snapshot in KV")
        assert {a.name for a in await journal.handoff() or []} >= {"TargetFiring", "Ambient"}
        await bus.publish(deployed("run-quiet"))
        event = await outcome(bus, "run-quiet", "Scored")
    assert isinstance(event, Scored)
    signals = {s.id: s for s in event.score.signals}
    assert event.verdict == "passed", signals
    # Every signal full but time_to_clear, which counts from the clear's settle time.
    assert signals["time_to_clear"].value > 0.5
    assert event.score.score == pytest.approx(0.9 + 0.1 * signals["time_to_clear"].value)
    assert signals["no_new_alerts"].satisfied
    assert signals["load_held"].satisfied
    # The run state's armed time and Alertmanager endpoint reach the monitoring gate.
    assert signals["monitoring_intact"].satisfied, signals["monitoring_intact"].detail
    assert "jobs doomed, loadgen" in signals["monitoring_intact"].detail
    assert signals["telemetry_intact"].satisfied
    assert_observed(event.sli_series, until=2.0)  # sustained 20 s x 0.1
    assert event.sli_series[0].sli == pytest.approx(0.123)


async def test_a_target_firing_throughout_fails(bus: Bus, warm: Plane, use_cases: UseCases) -> None:
    """The target never clears within max_clear (3 s here): failed, 0.35 (CI + no new alerts)."""
    use_cases.add("firing", "TargetFiring")
    await put_run(bus, "run-firing", "firing", warm.url, warm.alertmanager)
    async with serving(bus, oracle_service(settings(use_cases))):
        await bus.publish(deployed("run-firing"))
        event = await outcome(bus, "run-firing", "Scored")
    assert isinstance(event, Scored)
    assert (event.verdict, event.score.score) == ("failed", 0.35)
    assert {s.alert_state for s in event.sli_series} == {"firing"}
    assert event.sli_series[-1].offset_seconds >= 3.0


async def test_fail_closed_routes_and_one_outcome_per_run(
    bus: Bus, warm: Plane, use_cases: UseCases
) -> None:
    """No submission → failed; CI red → rejected; redeploy failed → failed (deployed).

    A submission alone scores nothing, and a later Deployed for a rejected run
    changes nothing: one Scored per run.
    """
    use_cases.add("quiet", "NeverFires")
    for run_id in ("run-nosub", "run-red", "run-nodeploy", "run-waits"):
        await put_run(bus, run_id, "quiet", warm.url, warm.alertmanager)
    async with serving(bus, oracle_service(settings(use_cases))):
        await bus.publish(submitted("run-nosub", flag=False))
        await bus.publish(submitted("run-waits", flag=True))
        await bus.publish(
            CiResult(
                run_id="run-red", producer="deployer", green=False, output="1 failed", duration_ms=5
            )
        )
        await bus.publish(deployed("run-nodeploy", redeployed=False))
        verdicts = {}
        for run_id in ("run-nosub", "run-red", "run-nodeploy"):
            event = await outcome(bus, run_id, "Scored")
            assert isinstance(event, Scored)
            verdicts[run_id] = (event.verdict, event.score.score, event.score.signals[0].id)
        await bus.publish(deployed("run-red", event_id="run-red.Deployed.late"))

        async def settled() -> bool:
            return all(
                [await consumer_settled(bus, d) for d in ("oracle-deployed", "oracle-submitted")]
            )

        await poll(settled, "the oracle's consumers settled")
    assert verdicts == {
        "run-nosub": ("failed", 0.0, "no_submission"),
        "run-red": ("rejected", 0.0, "ci_green"),
        "run-nodeploy": ("failed", 0.0, "deployed"),
    }
    assert await stored(bus, "run-red", "Scored") == 1
    assert await stored(bus, "run-waits", "Scored") == 0


async def test_no_honest_verdict_is_an_error(
    bus: Bus, use_cases: UseCases, silent_url: str, warm: Plane
) -> None:
    """A Prometheus that is gone, or a target alert it does not load → RunFailed error."""
    use_cases.add("quiet", "NeverFires")
    use_cases.add("unloaded", "NotARule")
    await put_run(bus, "run-gone", "quiet", silent_url)
    await put_run(bus, "run-unloaded", "unloaded", warm.url, warm.alertmanager)
    async with serving(bus, oracle_service(settings(use_cases))):
        await bus.publish(deployed("run-gone"))
        await bus.publish(deployed("run-unloaded"))
        gone = await outcome(bus, "run-gone", "RunFailed")
        unloaded = await outcome(bus, "run-unloaded", "RunFailed")
    assert isinstance(gone, RunFailed)
    assert isinstance(unloaded, RunFailed)
    assert (gone.stage, gone.verdict) == ("oracle", "error")
    assert silent_url in gone.reason
    assert "no alerting rule named 'NotARule'" in unloaded.reason
    assert await stored(bus, "run-gone", "Scored") == 0


async def test_a_stopped_oracle_hands_grading_back_and_the_next_one_resumes(
    bus: Bus, warm: Plane, use_cases: UseCases
) -> None:
    """Stop mid-grading: samples saved, input handed back; the next oracle finishes the
    window (the hole filled from Prometheus history) and publishes the one Scored."""
    use_cases.add("long", "NeverFires", sustained=30)
    await put_run(bus, "run-stop", "long", warm.url, warm.alertmanager)
    journal = RunJournal(bus.runs, "run-stop")
    async with serving(bus, oracle_service(settings(use_cases), deployed=FAST_DEPLOYED)) as stop:
        await bus.publish(deployed("run-stop"))

        async def some_saved() -> bool:
            return len(await journal.samples()) >= 5

        await poll(some_saved, "samples saved in KV")
        started = time.monotonic()
        stop.set()
    assert time.monotonic() - started < 5, "stopping waited for grading to finish"
    saved = await journal.samples()
    assert await stored(bus, "run-stop", "Scored") == 0
    async with serving(bus, oracle_service(settings(use_cases), deployed=FAST_DEPLOYED)):
        event = await outcome(bus, "run-stop", "Scored")
    assert isinstance(event, Scored)
    assert event.verdict == "passed", event.score.signals
    assert event.sli_series[: len(saved)] == [s.to_sli_sample() for s in saved]
    assert_observed(event.sli_series, until=3.0)
    assert await stored(bus, "run-stop", "Scored") == 1


@pytest.fixture
def oracle_processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Oracle processes started by the test; killed (process group) at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def start_oracle(
    nats_url: str, use_cases: UseCases, log: Path, processes: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "SREFORGE_ORACLE_USE_CASES_DIR": str(use_cases.root),
        "SREFORGE_ORACLE_LOAD_TARGET_PROMQL": LOAD[0],
        "SREFORGE_ORACLE_LOAD_ACHIEVED_PROMQL": LOAD[1],
        "SREFORGE_ORACLE_LOAD_WARMUP_SECONDS": "0.2",
        "SREFORGE_ORACLE_CHECKPOINT_SECONDS": "0.2",
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", ORACLE_PROCESS, nats_url, str(ACK_WAIT)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    processes.append(process)
    return process


@pytest.mark.timeout(90)
async def test_killing_the_oracle_mid_grading_still_ends_in_one_verdict(
    bus: Bus,
    nats_server: NatsServer,
    warm: Plane,
    use_cases: UseCases,
    oracle_processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    """SIGKILL the oracle process mid-grading, start another: exactly one Scored, passed.

    Passed is justified: the target stayed inactive, and the window is fully
    observed — live samples before the kill, Prometheus's own history for the
    outage (≥ ack_wait, far above the gap limit), live samples after.
    """
    nats_url = nats_server.url
    use_cases.add("long", "NeverFires", sustained=40)
    await put_run(bus, "run-kill", "long", warm.url, warm.alertmanager)
    await bootstrap(bus, [FAST_DEPLOYED])
    log = tmp_path / "oracle.log"
    first = start_oracle(nats_url, use_cases, log, oracle_processes)

    async def pulling() -> bool:
        info = await bus.js.consumer_info(STREAM, FAST_DEPLOYED.durable)
        return bool(info.num_waiting)

    await poll(pulling, f"the first oracle pulling; log: {log}", timeout=20)
    await bus.publish(deployed("run-kill"))
    journal = RunJournal(bus.runs, "run-kill")

    async def some_saved() -> bool:
        return len(await journal.samples()) >= 5

    await poll(some_saved, f"samples saved in KV; log: {log.read_text()[-2000:]}")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    saved = await journal.samples()
    assert await stored(bus, "run-kill", "Scored") == 0
    start_oracle(nats_url, use_cases, log, oracle_processes)
    event = await outcome(bus, "run-kill", "Scored", timeout=40)
    assert isinstance(event, Scored)
    assert event.verdict == "passed", (event.score.signals, log.read_text()[-3000:])
    assert event.sli_series[: len(saved)] == [s.to_sli_sample() for s in saved]
    assert_observed(event.sli_series, until=4.0)
    assert await stored(bus, "run-kill", "Scored") == 1
    assert await stored(bus, "run-kill", "RunFailed") == 0


async def test_two_oracles_never_interleave_samples_of_a_run(bus: Bus) -> None:
    """Sample chunks are created, never overwritten: the second writer backs off."""
    first, second = RunJournal(bus.runs, "run-twice"), RunJournal(bus.runs, "run-twice")
    assert await first.samples() == await second.samples() == []
    sample = GradingSample(at=datetime.now(UTC), offset_seconds=0.0, target_state="inactive")
    await first.append([sample])
    with pytest.raises(GradingInterrupted, match=r"oracle\.samples\.run-twice\.0 was written"):
        await second.append([sample])
    assert await RunJournal(bus.runs, "run-twice").samples() == [sample]


@pytest.mark.parametrize("points_per_query", [MAX_POINTS, 3])
async def test_history_reads_back_what_the_probe_would_have_seen(
    warm: Plane, points_per_query: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One sample per step from Prometheus's TSDB: alerts with state, SLI, load; long
    stretches are read in pieces without losing or repeating a step."""
    monkeypatch.setattr(history, "MAX_POINTS", points_per_query)
    start = datetime.now(UTC)  # `warm` saw the load scraped: history has it from here on
    end = start + timedelta(seconds=1)

    async def history_written() -> bool:  # a scrape and an evaluation past `end`
        return datetime.now(UTC) > end + timedelta(seconds=0.3)

    await poll(history_written, "a second of history")
    async with PrometheusProbe(
        warm.url,
        alert_name="TargetFiring",
        sli_promql="api:request_latency_p99_seconds",
        load_target_promql=LOAD[0],
        load_achieved_promql=LOAD[1],
        app_requests_promql=LOAD[1],
        load_requests_promql=LOAD[0],
    ) as probe:
        samples = await history_samples(
            probe, started_at=start, start=start, end=end, step_seconds=0.1
        )
    assert [round(s.offset_seconds, 3) for s in samples] == [round(0.1 * i, 3) for i in range(11)]
    for sample in samples:
        assert sample.target_state == "firing"
        assert {a.name: a.state for a in sample.alerts}["StaysPending"] == "pending"
        assert "alertstate" not in sample.alerts[0].labels
        assert sample.sli == pytest.approx(0.123)
        assert (sample.load_target_rps, sample.load_achieved_rps) == (20.0, 19.5)
        assert (sample.app_requests, sample.load_requests) == (19.5, 20.0)  # the count queries
        assert sample.monitoring is None  # no history of the plane: not evidence either way
        assert sample.from_history
