"""Fixtures for the recorder's tests: a scripted run's events, settings, a live recorder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sreforge_bus import Bus, Service, bootstrap
from sreforge_contracts import (
    AgentContext,
    AgentTranscript,
    BriefReady,
    CiResult,
    CleanedUp,
    Deployed,
    EvalOnly,
    Event,
    FaultArmed,
    OracleScore,
    OracleSignal,
    RunContract,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    RunWorkspace,
    ScenarioRef,
    Scored,
    SliSample,
    StackReady,
    Submission,
    Submitted,
    Trigger,
)
from sreforge_recorder import CONSUMER, LoggedEvent, RecorderSettings, recorder_service

T0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)
SCENARIO = "latency-cache-stampede"
ALERT = "BookshelfApiLatencyP99High"
DIFF = "--- a/app/cache.py\n+++ b/app/cache.py\n@@ -1 +1 @@\n-TTL = 0\n+TTL = 30\n"
SIGNAL_WEIGHTS = {
    "ci_green": 0.25,
    "alert_cleared": 0.35,
    "sustained_clear": 0.20,
    "time_to_clear": 0.10,
    "no_new_alerts": 0.10,
}


class RunStory:
    """The events of one scripted run, each at a fixed offset (seconds) from T0."""

    def __init__(self, run_id: str = "run-0001") -> None:
        self.run_id = run_id

    def at(self, seconds: float) -> datetime:
        """T0 plus `seconds`."""
        return T0 + timedelta(seconds=seconds)

    def requested(self) -> RunRequested:
        """t=0: run.start accepted."""
        return RunRequested(
            run_id=self.run_id,
            producer="correlator",
            occurred_at=self.at(0),
            scenario=SCENARIO,
            agent="reference",
            time_scale=0.1,
            alert_route="r7f3a91",
        )

    def stack_ready(self) -> StackReady:
        """t=5: the stack is up."""
        return StackReady(
            run_id=self.run_id,
            producer="deployer",
            occurred_at=self.at(5),
            stack="bookshelf-flask",
            run_dir=f"/tmp/stacks/{self.run_id}",
            agent_endpoints={"api": "http://127.0.0.1:21000"},
            operator_endpoints={"api": "http://127.0.0.1:21000"},
            topology="local",
        )

    def fault_armed(self) -> FaultArmed:
        """t=7: fault delivered, load on."""
        return FaultArmed(
            run_id=self.run_id,
            producer="deployer",
            occurred_at=self.at(7),
            armed_at=self.at(7),
            delivery_mode="arm-deploy-recent",
            load_target_rps=20,
        )

    def triggered(self) -> RunTriggered:
        """t=31: the expected alert fired."""
        trigger = Trigger(
            source="alertmanager",
            alert_name=ALERT,
            severity="page",
            labels={"alertname": ALERT, "service": "bookshelf-api"},
            fired_at=self.at(30),
        )
        return RunTriggered(
            run_id=self.run_id,
            producer="correlator",
            occurred_at=self.at(31),
            trigger=trigger.model_copy(update={"signals": [trigger.primary()]}),
            alert_fired_at=self.at(30),
        )

    def brief(self) -> BriefReady:
        """t=32: the on-call page is ready."""
        contract = RunContract(
            agent_context=AgentContext(
                services={"prometheus": "http://127.0.0.1:21001"},
                run_workspace=RunWorkspace(path="/tmp/ws", service="bookshelf-api"),
            ),
            scenario=ScenarioRef(id=SCENARIO, run_id=self.run_id, expected_alert=ALERT),
            eval_only=EvalOnly(
                alert_to_clear=ALERT, max_clear_time_seconds=60, sustained_clear_seconds=36
            ),
        )
        return BriefReady(
            run_id=self.run_id,
            producer="context",
            occurred_at=self.at(32),
            page="# You are on call\n",
            contract=contract,
        )

    def submitted(
        self,
        *,
        transcript_ref: str | None = None,
        rca: str | None = None,
        proof_run: bool = False,
    ) -> Submitted:
        """t=92: the agent submitted a diff (as a labelled proof run when `proof_run`)."""
        submission = Submission(
            agent_name="reference",
            diff=DIFF,
            submitted=True,
            rca=rca,
            transcript_ref=transcript_ref,
            duration_ms=59_500,
            evidence={"profile": "reference", "proof_run": proof_run},
        )
        return Submitted(
            run_id=self.run_id, producer="runner", occurred_at=self.at(92), submission=submission
        )

    def ci(self, *, green: bool = True, output: str = "12 passed in 3.1s") -> CiResult:
        """t=110: the CI gate's outcome."""
        return CiResult(
            run_id=self.run_id,
            producer="deployer",
            occurred_at=self.at(110),
            green=green,
            output=output,
            duration_ms=17_000,
            exit_code=0 if green else 1,
        )

    def deployed(self) -> Deployed:
        """t=125: merged and redeployed."""
        return Deployed(
            run_id=self.run_id,
            producer="deployer",
            occurred_at=self.at(125),
            redeployed=True,
            service="bookshelf-api",
            duration_ms=14_000,
            readiness="passed",
        )

    def scored(self, *, passed: bool = True, ci_green: bool = True, at: float = 185) -> Scored:
        """The oracle's score: every signal satisfied when `passed`, else some not."""
        signals = [
            OracleSignal(
                id=name,
                satisfied=(passed or name == "ci_green") and (ci_green or name != "ci_green"),
                value=1.0 if passed else 0.0,
                weight=weight,
                detail=f"{name} detail",
            )
            for name, weight in SIGNAL_WEIGHTS.items()
        ]
        score = OracleScore(score=0.95 if passed else 0.25, passed=passed, signals=signals)
        samples = [
            SliSample(
                at=self.at(125 + second),
                offset_seconds=second,
                sli=0.9 if second < 10 else 0.05,
                alert_state="firing" if second < 10 else "inactive",
                firing_alerts=[ALERT] if second < 10 else [],
                load_achieved_rps=20.0,
                load_target_rps=20.0,
            )
            for second in range(0, 60, 6)
        ]
        return Scored(
            run_id=self.run_id,
            producer="oracle",
            occurred_at=self.at(at),
            score=score,
            verdict=("passed" if passed else "failed") if ci_green else "rejected",
            sli_series=samples if ci_green else [],
        )

    def failed(self, stage: str, reason: str, verdict: str = "aborted", at: float = 0) -> RunFailed:
        """A stage failure at `at` seconds."""
        return RunFailed(
            run_id=self.run_id,
            producer="correlator",
            occurred_at=self.at(at),
            stage=stage,
            reason=reason,
            verdict=verdict,  # type: ignore[arg-type]
        )

    def rejected(self, reason: str, scenario: str | None) -> RunRejected:
        """run.start refused."""
        return RunRejected(
            run_id=self.run_id,
            producer="correlator",
            occurred_at=self.at(0),
            reason=reason,
            scenario=scenario,
        )

    def cleaned_up(self) -> CleanedUp:
        """t=190: torn down."""
        return CleanedUp(
            run_id=self.run_id, producer="deployer", occurred_at=self.at(190), verified=True
        )

    def happy(self, *, transcript_ref: str | None = None, proof_run: bool = False) -> list[Event]:
        """A whole passing run, RunRequested through Scored."""
        return [
            self.requested(),
            self.stack_ready(),
            self.fault_armed(),
            self.triggered(),
            self.brief(),
            self.submitted(
                transcript_ref=transcript_ref, rca="cache TTL was 0", proof_run=proof_run
            ),
            self.ci(),
            self.deployed(),
            self.scored(),
        ]

    def logged(self, events: Sequence[Event], first_seq: int = 1) -> list[LoggedEvent]:
        """The events as logged from the stream, with consecutive sequence numbers."""
        return [
            LoggedEvent(seq=first_seq + index, subject=event.subject, event=event)
            for index, event in enumerate(events)
        ]

    def transcript(self, *, confinement: str = "host-sandboxed") -> AgentTranscript:
        """A labelled agent transcript of this run."""
        return AgentTranscript(
            run_id=self.run_id,
            harness="reference",
            confinement=confinement,  # type: ignore[arg-type]
            captured_at=self.at(92),
            model="none",
            raw_text="applied the held-out fix\n",
        )


@pytest.fixture
def story() -> RunStory:
    """The events of a scripted run `run-0001`."""
    return RunStory()


@pytest.fixture
def settings(tmp_path: Path) -> RecorderSettings:
    """Recorder settings with every path under the test's tmp dir (nothing in the repo)."""
    (tmp_path / "use-cases" / "bookshelf" / "scenarios" / SCENARIO).mkdir(parents=True)
    return RecorderSettings(
        runs_dir=tmp_path / "runs",
        records_root=tmp_path / "use-cases",
        store_dir=tmp_path / "store",
        engine_version="0.1.0-test",
        backfill_timeout_seconds=5,
    )


StartRecorder = Callable[[RecorderSettings], Awaitable[Callable[[], Awaitable[None]]]]


@pytest.fixture
async def start_recorder(bus: Bus) -> AsyncIterator[StartRecorder]:
    """Start a recorder `Service` on the durable; returns an awaitable `stop()` for it.

    Every recorder still running is stopped at teardown; a crashed one fails the test.
    """
    await bootstrap(bus, [CONSUMER])
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(recorder_settings: RecorderSettings) -> Callable[[], Awaitable[None]]:
        service: Service = recorder_service(recorder_settings)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(bus, stop))
        running.append((stop, task))

        async def halt() -> None:
            stop.set()
            await asyncio.wait_for(task, 15)

        return halt

    yield start
    for stop, task in running:
        stop.set()
        await asyncio.wait_for(task, 15)
