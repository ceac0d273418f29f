"""The deployer service on a real bus with the tiny stack: each stage once, cleanup always."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sreforge_bus import STREAM, Bus, bootstrap
from sreforge_bus.testing import consumer_settled, poll, read_stream
from sreforge_contracts import (
    CiResult,
    CleanedUp,
    Deployed,
    Event,
    FaultArmed,
    OracleScore,
    Recorded,
    RunFailed,
    RunRequested,
    Scored,
    StackReady,
    Submission,
    Submitted,
    parse_event,
)
from sreforge_deployer import DeployerSettings
from sreforge_deployer._adapter import DeployerService, deployer_service
from sreforge_deployer._ports import listening_ports
from sreforge_deployer._process import group_members
from sreforge_deployer._workspace import Workspace
from sreforge_deployer.local import LocalStack

from .conftest import FIXTURES, WebhookReceiver

pytestmark = pytest.mark.integration

ROUTE = "0f3a9c2e7b1d4a6f8e2c5b9d1a7f3e6c"
PASSING = """diff --git a/test_ok.py b/test_ok.py
new file mode 100644
--- /dev/null
+++ b/test_ok.py
@@ -0,0 +1,2 @@
+def test_ok():
+    assert 1 + 1 == 2
"""
FAILING = PASSING.replace("test_ok", "test_bad").replace("1 + 1 == 2", "1 + 1 == 3")


@dataclass
class Running:
    """A deployer service serving on the bus, and how to stop it."""

    bus: Bus
    service: DeployerService
    settings: DeployerSettings
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def publish(self, event: Event) -> None:
        """Publish an input event as another service would."""
        await self.bus.publish(event)

    async def one(self, run_id: str, kind: type[Event], timeout: float = 60) -> Event:  # noqa: ASYNC109
        """The first stored `kind` event of the run."""
        found = await read_stream(self.bus, f"sreforge.run.{run_id}.{kind.__name__}", 1, timeout)
        return parse_event(found[0].data)

    async def stored(self, run_id: str, kind: type[Event]) -> int:
        """How many `kind` events of the run the stream holds."""
        subject = f"sreforge.run.{run_id}.{kind.__name__}"
        info = await self.bus.js.stream_info(STREAM, subjects_filter=subject)
        return sum((info.state.subjects or {}).values())

    async def settled(self) -> None:
        """Wait until every deployer consumer has handled and acked all it was given."""
        for route in self.service.routes:
            durable = route.consumer.durable
            await poll(_settled(self.bus, durable), f"{durable} settled", 60)


@pytest.fixture
async def deployer(
    bus: Bus, tmp_path: Path, webhook_receiver: WebhookReceiver
) -> AsyncIterator[Running]:
    """The deployer with the tiny scenarios, a shared token file and the test's receiver."""
    token_file = tmp_path / "trigger.token"
    token_file.write_text("shared-token-from-the-trigger\n")
    settings = DeployerSettings(
        runs_root=tmp_path / "stacks",
        use_cases=FIXTURES,
        alert_webhook_base=webhook_receiver.url,
        alert_token_file=token_file,
    )
    service = deployer_service(settings)
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    running = Running(bus, service, settings, stop, task)
    try:
        yield running
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 60)


def _requested(run_id: str, scenario: str = "tiny-ok", event_id: str = "") -> RunRequested:
    return RunRequested(
        run_id=run_id,
        producer="correlator",
        event_id=event_id,
        scenario=scenario,
        agent="noop",
        time_scale=0.1,
        alert_route=ROUTE,
    )


def _submitted(run_id: str, diff: str, event_id: str = "") -> Submitted:
    submission = Submission(agent_name="scripted", diff=diff, submitted=True, duration_ms=5)
    return Submitted(run_id=run_id, producer="runner", event_id=event_id, submission=submission)


def _recorded(run_id: str, event_id: str = "") -> Recorded:
    """What the recorder says once the run's record is written: the cue for cleanup."""
    return Recorded(
        run_id=run_id,
        producer="recorder",
        event_id=event_id,
        path=f"/records/{run_id}/record.json",
        sha256="0" * 64,
        verdict="aborted",
    )


@pytest.mark.timeout(180)
async def test_run_provisions_merges_redeploys_and_cleans_up_once_each(
    deployer: Running, webhook_receiver: WebhookReceiver
) -> None:
    """Every stage runs once under redelivery; pages use the run's route and shared token."""
    run_id = "tiny-happy-1"
    await deployer.publish(_requested(run_id))
    ready = await deployer.one(run_id, StackReady)
    armed = await deployer.one(run_id, FaultArmed)
    assert isinstance(ready, StackReady)
    assert isinstance(armed, FaultArmed)
    assert ready.run_workspace is not None
    assert ready.run_workspace.service == "tiny-api"
    assert set(ready.agent_endpoints) == {"prometheus", "alertmanager", "tiny-api"}
    assert armed.base_commit == Workspace(Path(ready.run_workspace.path)).head()
    assert armed.armed_at >= ready.occurred_at
    await poll(
        lambda: _true(
            webhook_receiver.firing("TinyLoadRunning", ROUTE, "shared-token-from-the-trigger")
        ),
        "a page on the run's route with the token from the shared file",
        30,
    )

    await deployer.publish(_requested(run_id, event_id="redelivered-request"))
    await deployer.publish(_submitted(run_id, PASSING))
    deployed = await deployer.one(run_id, Deployed)
    ci = await deployer.one(run_id, CiResult)
    assert isinstance(ci, CiResult)
    assert ci.green, ci.output
    sets = [(ran.name, ran.passed) for ran in ci.test_sets or []]
    assert sets == [("submitted", 1)], "tiny-ok's base has no tests: no hand-off set"
    assert isinstance(deployed, Deployed)
    assert deployed.redeployed, deployed.error
    assert deployed.readiness == "skipped", "tiny-ok has READINESS_GATE=off"
    workspace = Workspace(Path(ready.run_workspace.path))
    assert workspace.git("log", "-1", "--format=%s") == "Merge change into main"
    assert (workspace.path / "test_ok.py").is_file()

    await deployer.publish(_submitted(run_id, PASSING, event_id="redelivered-submission"))
    await deployer.publish(_recorded(run_id))
    cleaned = await deployer.one(run_id, CleanedUp)
    assert isinstance(cleaned, CleanedUp)
    assert cleaned.verified, cleaned.leftovers
    await deployer.publish(_recorded(run_id, event_id="second-record"))
    await deployer.settled()
    for kind in (StackReady, FaultArmed, CiResult, Deployed, CleanedUp):
        assert await deployer.stored(run_id, kind) == 1, f"one {kind.__name__}"
    assert not (deployer.settings.runs_root / run_id).exists()
    ports = {int(url.rsplit(":", 1)[1]) for url in ready.operator_endpoints.values()}
    assert not listening_ports(ports)


@pytest.mark.timeout(120)
async def test_a_stack_that_fails_to_start_fails_the_run_with_the_component_and_log(
    deployer: Running,
) -> None:
    """A crashing component → RunFailed{stack, aborted} naming it and its log; then CleanedUp."""
    run_id = "tiny-crash-1"
    await deployer.publish(_requested(run_id, scenario="tiny-crash"))
    failed = await deployer.one(run_id, RunFailed)
    assert isinstance(failed, RunFailed)
    assert failed.stage == "stack"
    assert failed.verdict == "aborted"
    assert "'tiny-load'" in failed.reason
    assert "fatal: cannot open /etc/tiny/load.conf" in failed.reason
    await deployer.publish(_recorded(run_id))
    cleaned = await deployer.one(run_id, CleanedUp)
    assert isinstance(cleaned, CleanedUp)
    assert cleaned.verified, cleaned.leftovers


@pytest.mark.timeout(120)
async def test_red_ci_is_not_deployed_and_stopping_tears_the_stack_down(
    deployer: Running,
) -> None:
    """CI red → CiResult with pytest's output and no Deployed; stopping removes the stack."""
    run_id = "tiny-red-1"
    await deployer.publish(_requested(run_id))
    ready = await deployer.one(run_id, StackReady)
    assert isinstance(ready, StackReady)
    await deployer.one(run_id, FaultArmed)
    await deployer.publish(_submitted(run_id, FAILING))
    ci = await deployer.one(run_id, CiResult)
    assert isinstance(ci, CiResult)
    assert not ci.green
    assert ci.exit_code == 1
    assert "test_bad" in ci.output
    await deployer.settled()
    assert await deployer.stored(run_id, Deployed) == 0
    assert (deployer.settings.runs_root / run_id).exists()

    deployer.stop.set()
    await asyncio.wait_for(deployer.task, 60)
    assert not (deployer.settings.runs_root / run_id).exists()
    assert deployer.service.deployer.stacks() == {}
    ports = {int(url.rsplit(":", 1)[1]) for url in ready.operator_endpoints.values()}
    assert not listening_ports(ports)


def _settled(bus: Bus, durable: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await consumer_settled(bus, durable)

    return check


async def _true(value: object) -> bool:
    return bool(value)


@pytest.mark.timeout(120)
async def test_a_stack_known_only_by_its_state_file_is_torn_down(deployer: Running) -> None:
    """A recorded run this deployer never provisioned: found under runs_root and removed."""
    stack = LocalStack(
        FIXTURES / "tiny" / "scenarios" / "tiny-ok",
        time_scale=0.1,
        run_id="tiny-orphan-1",
        settings=deployer.settings,
    )
    await asyncio.to_thread(stack.up)
    ports = set(stack.ports.values())
    try:
        await deployer.publish(_recorded(stack.run_id))
        cleaned = await deployer.one(stack.run_id, CleanedUp)
        assert isinstance(cleaned, CleanedUp)
        assert cleaned.verified, cleaned.leftovers
        assert not stack.run_dir.exists()
        assert not listening_ports(ports)
    finally:
        await asyncio.to_thread(stack.down)  # releases the port leases; nothing else left


@pytest.mark.timeout(120)
async def test_scored_stops_the_processes_and_recorded_removes_the_rest(
    deployer: Running,
) -> None:
    """Scored: every process of the stack stops, its run dir stays for the recorder;
    Recorded: the dir goes and CleanedUp is verified."""
    run_id = "tiny-scored-1"
    await deployer.publish(_requested(run_id))
    ready = await deployer.one(run_id, StackReady)
    assert isinstance(ready, StackReady)
    await deployer.one(run_id, FaultArmed)
    stack = deployer.service.deployer.stacks()[run_id]
    pgids = list(stack.pgids().values())
    assert all(group_members(pgid) for pgid in pgids)

    score = OracleScore(score=1.0, passed=True, signals=[])
    await deployer.publish(Scored(run_id=run_id, producer="oracle", score=score, verdict="passed"))
    await poll(
        lambda: _true(not any(group_members(pgid) for pgid in pgids)),
        "every process of the scored run stopped",
        30,
    )
    await deployer.settled()
    assert (deployer.settings.runs_root / run_id).exists(), "kept until the record is written"
    assert await deployer.stored(run_id, CleanedUp) == 0

    await deployer.publish(_recorded(run_id))
    cleaned = await deployer.one(run_id, CleanedUp)
    assert isinstance(cleaned, CleanedUp)
    assert cleaned.verified, cleaned.leftovers
    assert not (deployer.settings.runs_root / run_id).exists()
