"""The run state machine, pure: transitions, idempotence, ordering, terminal runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sreforge_contracts import (
    CiResult,
    Deployed,
    Event,
    OracleScore,
    Recorded,
    RunFailed,
    RunState,
    RunTriggered,
    Scored,
    Submission,
    Submitted,
)
from sreforge_correlator import announcements, fold, on_fired, on_resolved, overdue

from .conftest import (
    CLOCK,
    EXPECTED,
    RUN_ID,
    alert,
    at,
    brief_ready,
    fault_armed,
    requested,
    stack_ready,
)


def _submitted(seconds: float) -> Submitted:
    submission = Submission(agent_name="reference", submitted=True, duration_ms=1.0)
    return Submitted(
        run_id=RUN_ID, producer="runner", occurred_at=at(seconds), submission=submission
    )


def _ci(seconds: float) -> CiResult:
    return CiResult(
        run_id=RUN_ID,
        producer="deployer",
        occurred_at=at(seconds),
        green=True,
        output="ok",
        duration_ms=5,
    )


def _deployed(seconds: float, redeployed: bool = True) -> Deployed:
    return Deployed(
        run_id=RUN_ID,
        producer="deployer",
        occurred_at=at(seconds),
        redeployed=redeployed,
        service="bookshelf-api",
        duration_ms=3,
    )


def _scored(seconds: float) -> Scored:
    score = OracleScore(score=0.9, passed=True, signals=[])
    return Scored(
        run_id=RUN_ID, producer="oracle", occurred_at=at(seconds), score=score, verdict="passed"
    )


def _failed(seconds: float, stage: str = "setup") -> RunFailed:
    return RunFailed(
        run_id=RUN_ID,
        producer="deployer",
        occurred_at=at(seconds),
        stage=stage,
        reason="stack did not boot",
        verdict="aborted",
    )


def _recorded(seconds: float) -> Recorded:
    return Recorded(
        run_id=RUN_ID,
        producer="recorder",
        occurred_at=at(seconds),
        path="/r/record.json",
        sha256="a" * 64,
        verdict="passed",
    )


def _triggered() -> RunState:
    armed = fold(fold(requested(), stack_ready(), CLOCK), fault_armed(), CLOCK)
    return on_fired(armed, alert(), CLOCK, at(11))


def _through(*events: Event) -> RunState:
    state = requested()
    for event in events:
        state = fold(state, event, CLOCK)
    return state


@pytest.mark.parametrize(
    ("events", "phase", "facts"),
    [
        ([stack_ready()], "stack_ready", {"stack": "bookshelf-flask"}),
        ([stack_ready(), fault_armed()], "armed", {"armed_at": at(2)}),
        ([brief_ready(12)], "briefed", {"agent_deadline": at(612)}),
        ([_submitted(20)], "submitted", {}),
        ([_submitted(20), _ci(25)], "ci_done", {}),
        ([_ci(25), _deployed(30)], "deployed", {"deployed_at": at(30)}),
        ([_deployed(30, redeployed=False)], "deployed", {"deployed_at": None}),
        ([_deployed(30), _scored(90)], "scored", {"verdict": "passed"}),
        ([_failed(3)], "failed", {"verdict": "aborted", "failure": "setup: stack did not boot"}),
        ([_scored(90), _recorded(91)], "recorded", {"verdict": "passed"}),
    ],
)
def test_each_run_event_moves_the_run_to_its_phase(
    events: list[Event], phase: str, facts: dict[str, object]
) -> None:
    """Every folded event sets its phase and its facts (the table of the README)."""
    state = _through(*events)
    assert state.phase == phase
    assert state.history[-1].phase == phase
    for name, value in facts.items():
        found = getattr(state, name)
        assert (found.stack if name == "stack" else found) == value, name


def test_fault_armed_sets_the_scaled_confirm_fire_deadline() -> None:
    """The deadline is armed_at + the (already scaled) confirm-fire timeout of the clock."""
    state = _through(stack_ready(), fault_armed(seconds=2))
    assert state.confirm_fire_deadline == at(2 + CLOCK.confirm_fire_seconds)


@pytest.mark.parametrize(
    "event",
    [stack_ready(), fault_armed(), brief_ready(12), _submitted(20), _deployed(30), _scored(90)],
)
def test_a_redelivered_event_changes_nothing(event: Event) -> None:
    """Folding the same event twice returns the very same state: nothing is written."""
    once = fold(requested(), event, CLOCK)
    assert fold(once, event, CLOCK) is once


def test_events_folded_out_of_order_reach_the_same_state() -> None:
    """FaultArmed before StackReady: the phase is the furthest reached, both facts kept."""
    in_order = _through(stack_ready(), fault_armed())
    swapped = _through(fault_armed(), stack_ready())
    assert swapped.phase == in_order.phase == "armed"
    assert swapped.stack == in_order.stack
    assert swapped.confirm_fire_deadline == in_order.confirm_fire_deadline


@pytest.mark.parametrize("terminal", [_scored(90), _failed(3)])
def test_a_terminal_run_takes_no_transition_but_its_record(terminal: Event) -> None:
    """After Scored or RunFailed, only Recorded moves the run; then nothing does."""
    ended = _through(terminal)
    for late in (stack_ready(), fault_armed(), brief_ready(100), _deployed(100), _failed(100, "x")):
        assert fold(ended, late, CLOCK) is ended
    assert on_fired(ended, alert(), CLOCK, at(100)) is ended
    recorded = fold(ended, _recorded(120), CLOCK)
    assert recorded.phase == "recorded"
    assert recorded.verdict == ended.verdict  # the recorded verdict does not overwrite it
    assert fold(recorded, _failed(130, "late"), CLOCK) is recorded


def test_the_expected_alert_triggers_an_armed_run() -> None:
    """An armed run's expected alert on its route: phase triggered, alert_fired_at = fired_at."""
    state = _triggered()
    assert state.phase == "triggered"
    assert state.alert_fired_at == at(10)
    assert state.trigger is not None
    assert state.trigger.alert_name == EXPECTED
    assert [signal.alert_name for signal in state.trigger.signals] == [EXPECTED]
    [event] = announcements(state)
    assert isinstance(event, RunTriggered)
    assert event.event_id == f"{RUN_ID}.RunTriggered"


def test_a_repeated_trigger_does_not_trigger_twice() -> None:
    """The same alert again (a redelivery or a re-sent notification) changes nothing."""
    state = _triggered()
    assert on_fired(state, alert(), CLOCK, at(12)) is state


def test_an_unexpected_alert_is_a_co_firing_signal_not_a_trigger() -> None:
    """Another alert of the armed run is remembered, and attached when the trigger comes."""
    armed = _through(stack_ready(), fault_armed())
    other = on_fired(armed, alert("BookshelfApiErrorRateHigh", seconds=7), CLOCK, at(8))
    assert other.phase == "armed"
    assert [s.alert_name for s in other.handoff_alerts] == ["BookshelfApiErrorRateHigh"]
    far = on_fired(other, alert("DiskAlmostFull", seconds=-60), CLOCK, at(8))
    triggered = on_fired(far, alert(), CLOCK, at(11))
    assert triggered.trigger is not None
    attached = [s.alert_name for s in triggered.trigger.signals]
    assert attached == [EXPECTED, "BookshelfApiErrorRateHigh"]  # DiskAlmostFull: outside window


def test_an_alert_before_arming_is_held_and_triggers_at_arming() -> None:
    """A trigger handled before FaultArmed (reordered) triggers the run once it is armed."""
    early = on_fired(_through(stack_ready()), alert(), CLOCK, at(3))
    assert early.phase == "stack_ready"
    assert early.alert_fired_at is None
    armed = fold(early, fault_armed(), CLOCK)
    assert armed.phase == "triggered"
    assert armed.alert_fired_at == at(10)
    assert armed.history[-1].at == fault_armed().occurred_at


def test_a_resolved_alert_before_arming_is_forgotten() -> None:
    """A held alert that resolved before arming does not trigger the run."""
    early = on_fired(_through(stack_ready()), alert(), CLOCK, at(3))
    resolved = on_resolved(early, alert(status="resolved"))
    assert resolved.trigger is None
    assert resolved.handoff_alerts == []
    assert fold(resolved, fault_armed(), CLOCK).phase == "armed"


def test_a_signal_within_the_window_after_the_trigger_is_kept_until_thebrief_ready() -> None:
    """Co-firing just after the trigger joins handoff_alerts; after the brief nothing does."""
    state = _triggered()
    late = on_fired(state, alert("BookshelfDbSlow", seconds=14), CLOCK, at(14))
    assert [s.alert_name for s in late.handoff_alerts] == [EXPECTED, "BookshelfDbSlow"]
    briefed = fold(late, brief_ready(15), CLOCK)
    assert on_fired(briefed, alert("Other", seconds=16), CLOCK, at(16)) is briefed


def test_confirm_fire_deadline_fails_an_armed_run_aborted() -> None:
    """Past the deadline an armed run gets RunFailed{confirm-fire, aborted} naming the alert."""
    armed = _through(stack_ready(), fault_armed(seconds=2))
    assert overdue(armed, at(2 + 23.9)) is None
    failure = overdue(armed, at(2 + 24))
    assert failure is not None
    assert (failure.stage, failure.verdict) == ("confirm-fire", "aborted")
    assert EXPECTED in failure.reason
    assert "24s" in failure.reason
    assert failure.event_id == f"{RUN_ID}.RunFailed.confirm-fire"
    failed = fold(armed, failure, CLOCK)
    assert failed.phase == "failed"
    assert announcements(failed)[0].event_id == failure.event_id
    assert overdue(failed, at(100)) is None


def test_a_trigger_redelivered_within_the_grace_still_lands_before_the_deadline_fails() -> None:
    """The sweep waits `grace` past the deadline: a TriggerFired a crashed correlator
    never acked comes back within its ack wait and triggers the run instead."""
    armed = _through(stack_ready(), fault_armed(seconds=2))
    grace = timedelta(seconds=6)
    assert overdue(armed, at(2 + 24 + 5.9), grace) is None
    late = on_fired(armed, alert(seconds=20), CLOCK, at(2 + 24 + 5))
    assert late.phase == "triggered"
    assert overdue(late, at(2 + 24 + 6), grace) is None
    assert overdue(armed, at(2 + 24 + 6), grace) is not None


def test_a_triggered_run_is_never_overdue() -> None:
    """Once the alert fired, the confirm-fire deadline no longer applies."""
    assert overdue(_triggered(), at(10_000)) is None


def test_announcements_owe_nothing_for_other_phases() -> None:
    """Only a triggered run and a confirm-fire failure are the correlator's to announce."""
    assert announcements(requested()) == []
    assert announcements(_through(_failed(3))) == []  # another service's failure
    assert announcements(_through(stack_ready(), fault_armed())) == []
