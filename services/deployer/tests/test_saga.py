"""The deployer's saga against a fake topology: each stage, each failure's verdict, recovery.

`FakeTopology` is a test double of the `Topology` protocol (the real one is the local
stack, exercised by `test_bus_deployer.py`); `MemoryClaims` stands in for the KV claims.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog
from sreforge_bus import PublishError
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
    RunState,
    Scored,
    StackInfo,
    StackReady,
    Submission,
    Submitted,
)
from sreforge_deployer import (
    ArmFacts,
    CiTarget,
    ComponentStartError,
    DeployerError,
    LoadControlError,
    StackFacts,
    StackLostError,
    StackSpecError,
    WorkspaceError,
)
from sreforge_deployer._ledger import HolderState
from sreforge_deployer._saga import Saga, Step
from sreforge_deployer._spec import load_scenario_setup
from sreforge_deployer.gate import CiCheckout, CiRun, ci_clones

from .conftest import TINY_SCENARIOS

RUN = "run-saga-1"
LOG = structlog.get_logger("test.saga")
SETUP = load_scenario_setup(TINY_SCENARIOS / "tiny-ok")
WORKSPACE = Path("/nonexistent/workspace")


@dataclass
class FakeTopology:
    """A test double of `Topology`: records calls, raises what a test arms it with."""

    readiness_gate: bool = True
    service: str = "tiny-api"
    fail_up: DeployerError | None = None
    fail_arm: DeployerError | None = None
    fail_redeploy: DeployerError | None = None
    leftovers: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    adopted: bool = False
    armed: bool = False
    hold_redeploy: threading.Event | None = None

    def up(self) -> StackFacts:
        """Started (adopted: only its facts), or the armed failure."""
        self.calls.append("facts" if self.adopted else "up")
        if self.fail_up is not None:
            raise self.fail_up
        agent = {"prometheus": "http://127.0.0.1:1"}
        return StackFacts("tiny", Path("/nonexistent/run"), agent, agent, WORKSPACE, self.service)

    def arm(self) -> ArmFacts:
        """Armed (adopted after arming: the recorded facts), or the armed failure."""
        self.calls.append("armed facts" if self.adopted and self.armed else "arm")
        if self.fail_arm is not None:
            raise self.fail_arm
        self.armed = True
        return ArmFacts(datetime.now(UTC), "b" * 40, None, SETUP)

    def redeploy(self) -> None:
        """Redeployed (after `hold_redeploy` is set, when given), or the armed failure."""
        self.calls.append("redeploy")
        if self.hold_redeploy is not None:
            assert self.hold_redeploy.wait(10), "the test never let the redeploy finish"
        if self.fail_redeploy is not None:
            raise self.fail_redeploy

    def ci_target(self) -> CiTarget | None:
        """Known once up (or adopted armed)."""
        known = "up" in self.calls or (self.adopted and self.armed)
        return CiTarget(WORKSPACE, "b" * 40, "tiny-ok") if known else None

    def stop_processes(self) -> None:
        """Recorded only."""
        self.calls.append("stop")

    def down(self) -> list[str]:
        """What the test said is left."""
        self.calls.append("down")
        return self.leftovers


@dataclass
class FakeCheckout:
    """A test double of `Checkout`: a gate outcome, a merge that may fail."""

    run: CiRun | DeployerError
    fail_merge: DeployerError | None = None
    prepared: str | None = "t" * 40
    calls: list[str] = field(default_factory=list)

    def gate(self, diff: str) -> CiRun:
        """The armed CI outcome."""
        self.calls.append("gate")
        if isinstance(self.run, DeployerError):
            raise self.run
        return self.run

    def prepare(self, diff: str) -> str | None:
        """The tree a resumed merge finds."""
        self.calls.append("prepare")
        return self.prepared

    def merge(self, tree: str) -> None:
        """Merged, or the armed failure."""
        self.calls.append(f"merge {tree}")
        if self.fail_merge is not None:
            raise self.fail_merge

    def close(self) -> None:
        """Recorded only."""
        self.calls.append("close")


GREEN = CiRun(True, "1 passed", 0, 5.0, tree="t" * 40)
RED = CiRun(False, "1 failed", 1, 5.0, tree="t" * 40)


@dataclass
class FakeTopologies:
    """A test double of `TopologyProvider` handing out one fake topology and checkout."""

    topology: FakeTopology = field(default_factory=FakeTopology)
    checkouts: list[FakeCheckout] = field(default_factory=list)
    targets: list[CiTarget] = field(default_factory=list)
    gate_run: CiRun | DeployerError = GREEN
    fail_open: DeployerError | None = None
    elsewhere: list[str] = field(default_factory=list)
    adoptable: bool = False
    calls: list[str] = field(default_factory=list)

    def open(self, event: RunRequested) -> FakeTopology:
        """The fake topology, or the armed failure."""
        if self.fail_open is not None:
            raise self.fail_open
        return self.topology

    def adopt(self, run_id: str) -> FakeTopology:
        """The fake topology as a restarted deployer finds it, unless it is not adoptable."""
        self.calls.append("adopt")
        if not self.adoptable:
            raise StackLostError(f"run {run_id}: its stack's boot did not finish")
        self.topology.adopted = True
        return self.topology

    def checkout(self, target: CiTarget, *, confined: bool) -> FakeCheckout:
        """A new fake checkout (confined ones are the CI gate's)."""
        self.calls.append(f"checkout confined={confined}")
        self.targets.append(target)
        self.checkouts.append(FakeCheckout(self.gate_run))
        return self.checkouts[-1]

    def down_elsewhere(self, run_id: str) -> list[str]:
        """What the test said is left elsewhere."""
        self.calls.append("down_elsewhere")
        return self.elsewhere

    def leftovers(self, run_id: str) -> list[str]:
        """Nothing."""
        return []


@dataclass
class MemoryClaims:
    """`Claims` in a dict: a claim is pending (None) until its events are saved.

    Each claim names its holder, a process name; `restart()` kills the current process
    and names a new one (what a deployer restarted on the same bus looks like).
    """

    stored: dict[str, list[Event] | None] = field(default_factory=dict)
    state: RunState | None = None
    process: str = "p1"
    dead: set[str] = field(default_factory=set)
    holders: dict[str, str] = field(default_factory=dict)

    def restart(self, *, kill: bool = True) -> None:
        """From now on this is another process; the old one died unless `kill` is False."""
        if kill:
            self.dead.add(self.process)
        self.process = f"p{len(self.dead) + 2}"

    async def claim(self, stage: str, run_id: str) -> bool:
        """First caller wins."""
        key = f"deployer.{stage}.{run_id}"
        if key in self.stored:
            return False
        self.stored[key] = None
        self.holders[key] = self.process
        return True

    async def holder(self, stage: str, run_id: str) -> HolderState:
        """This process, another live one, or gone."""
        holder = self.holders.get(f"deployer.{stage}.{run_id}")
        if holder == self.process:
            return "here"
        return "gone" if holder is None or holder in self.dead else "elsewhere"

    async def take_over(self, stage: str, run_id: str) -> bool:
        """A pending claim becomes this process's."""
        key = f"deployer.{stage}.{run_id}"
        if key not in self.stored or self.stored[key] is not None:
            return False
        self.holders[key] = self.process
        return True

    async def outcome(self, stage: str, run_id: str) -> list[Event] | None:
        """Saved events, None while pending."""
        return self.stored.get(f"deployer.{stage}.{run_id}")

    async def save(self, stage: str, run_id: str, events: Sequence[Event]) -> None:
        """Keep them."""
        self.stored[f"deployer.{stage}.{run_id}"] = list(events)

    async def ended(self, run_id: str) -> bool:
        """Cleanup claimed."""
        return f"deployer.cleanup.{run_id}" in self.stored

    async def run_state(self, run_id: str) -> RunState | None:
        """The state the test put there."""
        return self.state


def _requested() -> RunRequested:
    return RunRequested(
        run_id=RUN, producer="correlator", scenario="tiny-ok", agent="noop", alert_route="r1"
    )


def _submitted(submitted: bool = True) -> Submitted:
    submission = Submission(agent_name="scripted", diff="d", submitted=submitted, duration_ms=1)
    return Submitted(run_id=RUN, producer="runner", submission=submission)


def _recorded() -> Recorded:
    return Recorded(
        run_id=RUN, producer="recorder", path="/r.json", sha256="0" * 64, verdict="passed"
    )


async def _stack(saga: Saga, claims: MemoryClaims, refuse: bool = False) -> list[Event]:
    """Run the stack stage as the adapter does: publish the first events, then go on."""
    async with saga.stack(_requested(), claims, LOG) as step:
        return await _go_on(step, refuse)


async def _ci(saga: Saga, claims: MemoryClaims, submitted: bool = True) -> list[Event]:
    """Run the CI stage as the adapter does."""
    async with saga.ci(_submitted(submitted), claims, LOG) as step:
        return await _go_on(step)


async def _go_on(step: Step, refuse: bool = False) -> list[Event]:
    if step.then is None:
        return list(step.events)
    if refuse:
        assert step.abandon is not None
        return [*await step.abandon(PublishError("refused"))]
    return [*step.events, *await step.then()]


async def _armed(saga: Saga, claims: MemoryClaims) -> None:
    events = await _stack(saga, claims)
    assert [type(e) for e in events] == [StackReady, FaultArmed]


async def test_stack_stage_publishes_ready_then_arms_and_stores_both() -> None:
    """StackReady goes out before arming; the claim stores both for a replay."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    async with saga.stack(_requested(), claims, LOG) as step:
        assert [type(e) for e in step.events] == [StackReady]
        assert step.then is not None
        armed = await step.then()
    assert [type(e) for e in armed] == [FaultArmed]
    assert claims.stored[f"deployer.stack.{RUN}"] == [*step.events, *armed]
    assert provider.topology.calls == ["up", "arm"]
    assert saga.topologies() == {RUN: provider.topology}


@pytest.mark.parametrize(
    "error",
    [
        ComponentStartError("tiny-api", "exit 3", log_path=Path("/x.log"), log_tail="boom"),
        StackSpecError("no stack.toml"),
    ],
)
async def test_stack_that_does_not_come_up_aborts_the_run(error: DeployerError) -> None:
    """A stack that fails to start (or is unknown) is the run's fault-free abort, once."""
    provider, claims = FakeTopologies(), MemoryClaims()
    if isinstance(error, StackSpecError):
        provider.fail_open = error
    else:
        provider.topology.fail_up = error
    saga = Saga(provider)
    events = await _stack(saga, claims)
    assert len(events) == 1
    assert isinstance(events[0], RunFailed)
    assert (events[0].stage, events[0].verdict) == ("stack", "aborted")
    assert type(error).__name__ in events[0].reason
    assert saga.topologies() == {}
    assert claims.stored[f"deployer.stack.{RUN}"] == events


async def test_failed_arming_aborts_and_tears_the_stack_down() -> None:
    """StackReady was out; the arm failure follows it and nothing of the stack is kept."""
    provider, claims = FakeTopologies(), MemoryClaims()
    provider.topology.fail_arm = WorkspaceError("patch did not apply")
    saga = Saga(provider)
    events = await _stack(saga, claims)
    assert isinstance(events[1], RunFailed)
    assert (events[1].stage, events[1].verdict) == ("arm", "aborted")
    assert "patch did not apply" in events[1].reason
    assert provider.topology.calls == ["up", "arm", "down"]
    assert saga.topologies() == {}


async def test_refused_stack_ready_tears_down_with_an_error_verdict() -> None:
    """The bus refusing StackReady is an engine error, and the stack does not stay up."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    events = await _stack(saga, claims, refuse=True)
    assert isinstance(events[0], RunFailed)
    assert (events[0].stage, events[0].verdict) == ("stack", "error")
    assert provider.topology.calls == ["up", "down"]
    assert claims.stored[f"deployer.stack.{RUN}"] == events


async def test_redelivered_run_requested_replays_without_starting_again() -> None:
    """A redelivery after the stage finished republishes both events; up() ran once."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    first = await _stack(saga, claims)
    again = await _stack(saga, claims)
    assert again == first
    assert provider.topology.calls == ["up", "arm"]


async def test_redelivery_while_this_process_provisions_publishes_nothing() -> None:
    """A pending claim of a run this process holds: it is still at it, so no event."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    async with saga.stack(_requested(), claims, LOG) as step:
        assert step.then is not None
        assert await _stack(saga, claims) == []
        await step.then()


async def test_run_already_cleaned_up_is_not_provisioned() -> None:
    """RunRequested after cleanup (a late redelivery) starts nothing and stores no events."""
    provider, claims = FakeTopologies(), MemoryClaims()
    await claims.claim("cleanup", RUN)
    assert await _stack(Saga(provider), claims) == []
    assert claims.stored[f"deployer.stack.{RUN}"] == []
    assert provider.topology.calls == []


async def test_green_ci_merges_and_redeploys_then_closes_the_checkout() -> None:
    """CiResult goes out before the merge; Deployed carries the readiness gate's outcome."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    events = await _ci(saga, claims)
    assert isinstance(events[0], CiResult)
    assert events[0].green
    assert isinstance(events[1], Deployed)
    assert events[1].redeployed
    assert events[1].readiness == "passed"
    (checkout,) = provider.checkouts
    assert checkout.calls == ["gate", f"merge {'t' * 40}", "close"]
    assert provider.calls == ["checkout confined=True"]
    assert provider.topology.calls[-1] == "redeploy"


async def test_ci_clones_are_named_by_run_and_a_left_one_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkout is asked for by run id (its clone is `ci-<run_id>-*`); a clone a
    deployer killed mid-CI left is removed when CI runs again and at the cleanup."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    left = tmp_path / f"ci-{RUN}-killed"
    (left / "repo").mkdir(parents=True)
    other = tmp_path / "ci-run-other-1"
    other.mkdir()
    await _ci(saga, claims)
    assert [target.run_id for target in provider.targets] == [RUN]
    assert not left.exists()
    assert other.exists()  # another run's clone is not this run's to remove
    (left / "repo").mkdir(parents=True)
    await saga.cleanup(_recorded(), claims, LOG)
    assert not left.exists()
    assert other.exists()
    with CiCheckout(tmp_path, "HEAD", run_id=RUN) as checkout:
        assert ci_clones(RUN) == [checkout.path.parent]
        assert checkout.path.parent.name.startswith(f"ci-{RUN}-")
    assert ci_clones(RUN) == []


async def test_red_ci_publishes_the_result_and_deploys_nothing() -> None:
    """A red gate: CiResult only, no merge, the checkout removed."""
    provider, claims = FakeTopologies(gate_run=RED), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    events = await _ci(saga, claims)
    assert [type(e) for e in events] == [CiResult]
    assert provider.checkouts[0].calls == ["gate", "close"]
    assert f"deployer.deploy.{RUN}" not in claims.stored


async def test_broken_gate_is_an_engine_error() -> None:
    """The gate failing to run (clone, jail) is not the agent's red: verdict error."""
    provider = FakeTopologies(gate_run=WorkspaceError("CI: clone failed"))
    claims = MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    events = await _ci(saga, claims)
    assert isinstance(events[0], RunFailed)
    assert (events[0].stage, events[0].verdict) == ("ci", "error")
    assert "clone failed" in events[0].reason


async def test_failed_merge_skips_the_redeploy() -> None:
    """A merge that fails is a failed Deployed with readiness skipped; no restart."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    async with saga.ci(_submitted(), claims, LOG) as step:
        provider.checkouts[0].fail_merge = WorkspaceError("main moved")
        assert step.then is not None
        (result,) = await step.then()
    assert isinstance(result, Deployed)
    assert (result.redeployed, result.readiness) == (False, "skipped")
    assert result.error is not None
    assert result.error.startswith("merge failed: main moved")
    assert "redeploy" not in provider.topology.calls


@pytest.mark.parametrize(
    ("error", "gate", "readiness", "says"),
    [
        (LoadControlError("POST /pause answered 500"), True, "failed", "readiness gate"),
        (DeployerError("pids survived"), True, "failed", "redeploy of 'tiny-api' failed"),
        (DeployerError("pids survived"), False, "skipped", "redeploy of 'tiny-api' failed"),
    ],
)
async def test_failed_redeploy_maps_to_its_readiness(
    error: DeployerError, gate: bool, readiness: str, says: str
) -> None:
    """The load generator refusing the gate fails readiness; other errors fail the redeploy."""
    topology = FakeTopology(readiness_gate=gate, fail_redeploy=error)
    provider, claims = FakeTopologies(topology=topology), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    events = await _ci(saga, claims)
    result = events[-1]
    assert isinstance(result, Deployed)
    assert (result.redeployed, result.readiness) == (False, readiness)
    assert result.error is not None
    assert says in result.error


async def test_unsubmitted_or_ended_runs_skip_ci() -> None:
    """No submission, or a run already cleaned up: no gate, no claim."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    assert await _ci(saga, claims, submitted=False) == []
    await claims.claim("cleanup", RUN)
    assert await _ci(saga, claims) == []
    assert provider.checkouts == []
    assert f"deployer.ci.{RUN}" not in claims.stored


async def test_redelivered_submission_replays_ci_and_deploy() -> None:
    """After both stages: the stored CiResult and Deployed again, no second gate."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    first = await _ci(saga, claims)
    assert await _ci(saga, claims) == first
    assert len(provider.checkouts) == 1
    assert provider.topology.calls.count("redeploy") == 1


async def test_merge_cut_short_after_ci_is_finished_on_redelivery() -> None:
    """CiResult out, then a crash before the merge: the redelivery merges, unconfined."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    async with saga.ci(_submitted(), claims, LOG) as step:
        ci = list(step.events)  # published; the process "stops" before `then`
    events = await _ci(saga, claims)
    assert events[0] == ci[0]
    assert isinstance(events[1], Deployed)
    assert events[1].redeployed
    assert provider.calls == ["checkout confined=True", "checkout confined=False"]
    assert provider.checkouts[1].calls == ["prepare", f"merge {'t' * 40}", "close"]


async def test_ci_replayed_after_a_restart_uses_the_run_state() -> None:
    """A new process finds the workspace in the run state; no stack to adopt: `error`."""
    provider, claims = FakeTopologies(), MemoryClaims()
    claims.state = RunState(
        run_id=RUN,
        scenario_id="tiny-ok",
        agent="noop",
        time_scale=1.0,
        alert_route="r1",
        base_commit="b" * 40,
        stack=StackInfo(
            stack="tiny",
            run_dir="/nonexistent/run",
            agent_endpoints={},
            operator_endpoints={},
            run_workspace={"path": str(WORKSPACE), "service": "tiny-api"},
        ),
    )
    events = await _ci(Saga(provider), claims)
    assert isinstance(events[0], CiResult)
    assert events[0].green
    assert isinstance(events[1], RunFailed)
    assert (events[1].stage, events[1].verdict) == ("deploy", "error")
    assert "no running stack" in events[1].reason


async def test_ci_without_a_known_workspace_is_an_engine_error() -> None:
    """No StackReady in the run state and no stack here: CI cannot run, verdict error."""
    provider, claims = FakeTopologies(), MemoryClaims()
    events = await _ci(Saga(provider), claims)
    assert isinstance(events[0], RunFailed)
    assert (events[0].stage, events[0].verdict) == ("ci", "error")
    assert "no workspace known" in events[0].reason


@pytest.mark.parametrize(("left", "verified"), [([], True), (["pid 7 alive"], False)])
async def test_cleanup_tears_down_once_and_says_what_is_left(
    left: list[str], verified: bool
) -> None:
    """CleanedUp is verified only when nothing is left; a redelivery replays it."""
    provider, claims = FakeTopologies(topology=FakeTopology(leftovers=left)), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    (done,) = await saga.cleanup(_recorded(), claims, LOG)
    assert isinstance(done, CleanedUp)
    assert (done.verified, done.leftovers) == (verified, left)
    assert await saga.cleanup(_recorded(), claims, LOG) == [done]
    assert provider.topology.calls.count("down") == 1
    assert saga.topologies() == {}


async def test_cleanup_of_a_stack_held_elsewhere_uses_its_state_file() -> None:
    """A run this process does not hold (restarted): teardown from the recorded state."""
    provider, claims = FakeTopologies(elsewhere=["owned by pid 9"]), MemoryClaims()
    (done,) = await Saga(provider).cleanup(_recorded(), claims, LOG)
    assert isinstance(done, CleanedUp)
    assert not done.verified
    assert provider.calls == ["down_elsewhere"]


async def test_scored_stops_the_processes_and_emits_nothing() -> None:
    """Scored stops the stack early; the verified teardown waits for Recorded."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await _armed(saga, claims)
    score = OracleScore(score=1.0, passed=True, signals=[])
    scored = Scored(run_id=RUN, producer="oracle", score=score, verdict="passed")
    assert await saga.scored(scored) == ()
    assert provider.topology.calls[-1] == "stop"
    assert saga.topologies() == {RUN: provider.topology}
