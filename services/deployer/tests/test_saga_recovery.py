"""The saga after a crash: a restarted deployer resumes each stage; a duplicate is ignored.

A restart is a new `Saga` whose claims name a new process (`MemoryClaims.restart`),
the old holder dead; the stack it left is adopted (`FakeTopologies.adoptable`).
"""

from __future__ import annotations

import asyncio
import threading

from sreforge_contracts import (
    CiResult,
    Deployed,
    FaultArmed,
    RunFailed,
    RunState,
    StackInfo,
    StackReady,
)
from sreforge_deployer._saga import Saga

from .test_saga import (
    RUN,
    WORKSPACE,
    FakeTopologies,
    MemoryClaims,
    _armed,
    _ci,
    _stack,
)

GREEN_CI = CiResult(run_id=RUN, producer="deployer", green=True, output="", duration_ms=1)


def _announced(armed: bool) -> RunState:
    """The run state once StackReady (and, when `armed`, FaultArmed) were folded in."""
    return RunState(
        run_id=RUN,
        scenario_id="tiny-ok",
        agent="noop",
        time_scale=1.0,
        alert_route="r1",
        base_commit="b" * 40 if armed else None,
        stack=StackInfo(
            stack="tiny",
            run_dir="/nonexistent/run",
            agent_endpoints={},
            operator_endpoints={},
            run_workspace={"path": str(WORKSPACE), "service": "tiny-api"},
        ),
    )


async def test_restart_mid_boot_clears_what_was_left_and_boots_again() -> None:
    """A boot cut short announced nothing: its remains go, and the stack boots afresh."""
    provider, claims = FakeTopologies(), MemoryClaims()
    await claims.claim("stack", RUN)
    claims.restart()
    events = await _stack(Saga(provider), claims)
    assert [type(e) for e in events] == [StackReady, FaultArmed]
    assert provider.calls == ["adopt", "down_elsewhere"]
    assert provider.topology.calls == ["up", "arm"]
    assert claims.holders[f"deployer.stack.{RUN}"] == claims.process


async def test_restart_mid_arm_adopts_the_stack_and_arms_it() -> None:
    """A stack that came up (StackReady out) is adopted, announced again, then armed."""
    provider, claims = FakeTopologies(adoptable=True), MemoryClaims(state=_announced(False))
    await claims.claim("stack", RUN)
    claims.restart()
    saga = Saga(provider)
    events = await _stack(saga, claims)
    assert [type(e) for e in events] == [StackReady, FaultArmed]
    assert provider.topology.calls == ["facts", "arm"]
    assert saga.topologies() == {RUN: provider.topology}


async def test_restart_after_arming_republishes_what_arming_recorded() -> None:
    """Armed before the crash: FaultArmed again from the stack's record, no second arming."""
    provider, claims = FakeTopologies(adoptable=True), MemoryClaims(state=_announced(True))
    provider.topology.armed = True
    await claims.claim("stack", RUN)
    claims.restart()
    events = await _stack(Saga(provider), claims)
    assert [type(e) for e in events] == [StackReady, FaultArmed]
    assert provider.topology.calls == ["facts", "armed facts"]


async def test_an_announced_stack_that_is_lost_ends_the_run_error_with_the_reason() -> None:
    """StackReady is out but the stack cannot be adopted: nothing can be repeated."""
    provider, claims = FakeTopologies(), MemoryClaims(state=_announced(False))
    await claims.claim("stack", RUN)
    claims.restart()
    (failed,) = await _stack(Saga(provider), claims)
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("stack", "error")
    assert "cannot be repeated" in failed.reason
    assert "boot did not finish" in failed.reason
    assert provider.topology.calls == []


async def test_restart_mid_ci_repeats_the_gate_and_deploys_on_the_adopted_stack() -> None:
    """CI cut short: the gate runs again (it is a pure check), then merge and redeploy."""
    provider, claims = FakeTopologies(adoptable=True), MemoryClaims(state=_announced(True))
    provider.topology.armed = True
    await claims.claim("ci", RUN)
    claims.restart()
    events = await _ci(Saga(provider), claims)
    assert isinstance(events[0], CiResult)
    assert events[0].green
    assert isinstance(events[1], Deployed)
    assert events[1].redeployed
    assert provider.calls == ["checkout confined=True", "adopt"]
    assert provider.topology.calls == ["redeploy"]


async def test_restart_mid_redeploy_merges_and_redeploys_again() -> None:
    """The merge or redeploy cut short: repeated on the adopted stack, same verdict path."""
    provider, claims = FakeTopologies(adoptable=True), MemoryClaims(state=_announced(True))
    provider.topology.armed = True
    await claims.claim("ci", RUN)
    await claims.save("ci", RUN, [GREEN_CI])
    await claims.claim("deploy", RUN)
    claims.restart()
    events = await _ci(Saga(provider), claims)
    assert events[0] == GREEN_CI
    assert isinstance(events[1], Deployed)
    assert events[1].redeployed
    assert provider.checkouts[0].calls == ["prepare", f"merge {'t' * 40}", "close"]
    assert provider.topology.calls == ["redeploy"]


async def test_redeploy_cut_short_with_the_stack_lost_is_an_error_not_a_repeat() -> None:
    """No stack to adopt: RunFailed{deploy, error} naming why (a harness fault is never
    charged to the agent as a failed redeploy), no redeploy attempted."""
    provider, claims = FakeTopologies(), MemoryClaims(state=_announced(True))
    await claims.claim("ci", RUN)
    await claims.save("ci", RUN, [GREEN_CI])
    await claims.claim("deploy", RUN)
    claims.restart()
    events = await _ci(Saga(provider), claims)
    failed = events[1]
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("deploy", "error")
    assert "boot did not finish" in failed.reason
    assert "redeploy" not in provider.topology.calls
    assert claims.stored[f"deployer.deploy.{RUN}"] == [failed]


async def test_duplicate_delivery_to_the_live_process_starts_nothing_and_fails_nothing() -> None:
    """A redelivery while this process still redeploys (a late heartbeat): no events."""
    provider, claims = FakeTopologies(), MemoryClaims()
    provider.topology.hold_redeploy = threading.Event()
    saga = Saga(provider)
    await _armed(saga, claims)
    first = asyncio.create_task(_ci(saga, claims))
    for _ in range(200):
        if "redeploy" in provider.topology.calls:
            break
        await asyncio.sleep(0.01)
    assert "redeploy" in provider.topology.calls, "the first delivery never reached redeploy"
    duplicate = await _ci(saga, claims)
    assert [type(e) for e in duplicate] == [CiResult]  # CI's stored result; deploy in flight
    provider.topology.hold_redeploy.set()
    events = await first
    assert [type(e) for e in events] == [CiResult, Deployed]
    assert provider.topology.calls.count("redeploy") == 1
    assert len(provider.checkouts) == 2  # the duplicate's merge clone, never merged
    assert provider.checkouts[1].calls == ["prepare", "close"]


async def test_a_stage_held_by_another_live_process_is_left_to_it() -> None:
    """Two deployers on one bus: the pending claim's holder is alive, so no second stage."""
    provider, claims = FakeTopologies(adoptable=True), MemoryClaims()
    await claims.claim("stack", RUN)
    claims.restart(kill=False)
    assert await _stack(Saga(provider), claims) == []
    assert provider.calls == []
    assert provider.topology.calls == []


async def test_an_attempt_that_failed_in_this_process_is_taken_up_again() -> None:
    """Held here but not in flight (its handler raised): the redelivery does the stage."""
    provider, claims = FakeTopologies(), MemoryClaims()
    saga = Saga(provider)
    await claims.claim("stack", RUN)
    assert [type(e) for e in await _stack(saga, claims)] == [StackReady, FaultArmed]
