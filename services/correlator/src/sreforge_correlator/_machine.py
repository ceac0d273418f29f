"""The run state machine, pure: (state, event or trigger, clock, now) → the next state.

Facts are merged, not replayed: each fact (the stack, `armed_at`, ...) is taken the
first time it arrives, and the phase is the furthest one reached. So a redelivered
event changes nothing, and events folded out of order land in the same state.
A terminal run (scored, failed) takes no further transition except being recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sreforge_contracts import (
    RUN_PHASES,
    BriefReady,
    CiResult,
    Deployed,
    Event,
    FaultArmed,
    Recorded,
    RunFailed,
    RunPhase,
    RunState,
    RunTriggered,
    Scored,
    StackInfo,
    StackReady,
    Submitted,
    Trigger,
    TriggerSignal,
)

__all__ = [
    "CONFIRM_FIRE_STAGE",
    "PRODUCER",
    "TASK_SOURCE",
    "RunClock",
    "announcements",
    "entered_at",
    "fold",
    "on_fired",
    "on_resolved",
    "overdue",
    "task_trigger",
]

PRODUCER = "correlator"
CONFIRM_FIRE_STAGE = "confirm-fire"
TASK_SOURCE = "task"
"""The trigger source (and name) of a patch run: the task page, not an alert."""

_RANK: dict[RunPhase, int] = {phase: rank for rank, phase in enumerate(RUN_PHASES)}


@dataclass(frozen=True)
class RunClock:
    """The durations a run's transitions use, already scaled to its time scale."""

    confirm_fire_seconds: float
    agent_budget_seconds: float
    correlation_window_seconds: float
    triggered_at_arm: bool = False
    """A patch run: no alert to wait for; FaultArmed (its workspace at the base commit)
    triggers it at once, with the task page as its trigger (`task_trigger`)."""


def fold(state: RunState, event: Event, clock: RunClock) -> RunState:
    """The state after `event`; `state` itself when the event changes nothing."""
    if state.phase == "recorded" or (state.terminal and not isinstance(event, Recorded)):
        return state
    at = event.occurred_at
    if isinstance(event, StackReady):
        return _reach(state, "stack_ready", at, stack=_stack_info(event))
    if isinstance(event, FaultArmed):
        deadline = event.armed_at + timedelta(seconds=clock.confirm_fire_seconds)
        armed = _reach(
            state,
            "armed",
            at,
            armed_at=event.armed_at,
            confirm_fire_deadline=deadline,
            base_commit=event.base_commit,
        )
        if armed.phase == "armed" and clock.triggered_at_arm:
            return _trigger(armed, task_trigger(event.armed_at), clock, at)
        held = armed.trigger
        if armed.phase == "armed" and held is not None:
            return _trigger(armed, held, clock, at)  # its notification was handled first
        return armed
    if isinstance(event, BriefReady):
        budget = timedelta(seconds=clock.agent_budget_seconds)
        return _reach(state, "briefed", at, agent_deadline=at + budget)
    if isinstance(event, Submitted):
        return _reach(state, "submitted", at)
    if isinstance(event, CiResult):
        return _reach(state, "ci_done", at)
    if isinstance(event, Deployed):
        return _reach(state, "deployed", at, deployed_at=at if event.redeployed else None)
    if isinstance(event, Scored):
        return _reach(state, "scored", at, verdict=event.verdict)
    if isinstance(event, RunFailed):
        failure = f"{event.stage}: {event.reason}"
        return _reach(state, "failed", at, verdict=event.verdict, failure=failure)
    if isinstance(event, Recorded):
        return _reach(state, "recorded", at, verdict=event.verdict)
    return state


def task_trigger(at: datetime) -> Trigger:
    """A patch run's trigger: its task page, handed over when the workspace is ready."""
    return Trigger(source=TASK_SOURCE, alert_name=TASK_SOURCE, fired_at=at)


def on_fired(state: RunState, trigger: Trigger, clock: RunClock, now: datetime) -> RunState:
    """The state after a firing signal on the run's route.

    The expected alert triggers an armed run. Before arming it is held (in
    `state.trigger`, phase unchanged) and triggers the run when FaultArmed is
    folded. Every firing signal is remembered in `handoff_alerts` until the brief.
    """
    if trigger.status != "firing" or state.terminal:
        return state
    signal = trigger.primary()
    if _RANK[state.phase] >= _RANK["triggered"]:
        return _late_signal(state, signal, clock)
    remembered = _remember(state, signal)
    if trigger.alert_name != state.expected_alert:
        return remembered
    if state.phase == "armed":
        return _trigger(remembered, trigger, clock, now)
    if state.trigger is None:
        return remembered.model_copy(update={"trigger": trigger})
    return remembered


def on_resolved(state: RunState, trigger: Trigger) -> RunState:
    """Forget a resolved signal (and a held trigger) while the brief is still to be built."""
    if state.terminal or _RANK[state.phase] >= _RANK["briefed"]:
        return state
    signal = trigger.primary()
    kept = [known for known in state.handoff_alerts if not _same(known, signal)]
    changes: dict[str, object] = {}
    if len(kept) != len(state.handoff_alerts):
        changes["handoff_alerts"] = kept
    held = state.trigger
    if state.phase != "triggered" and held is not None and _same(held.primary(), signal):
        changes["trigger"] = None
    return state.model_copy(update=changes) if changes else state


def overdue(state: RunState, now: datetime, grace: timedelta = timedelta(0)) -> RunFailed | None:
    """The confirm-fire failure of an armed run whose deadline (plus `grace`) has passed.

    `grace` covers a TriggerFired still on its way: one a crashed correlator took and
    never acked comes back within the triggers consumer's ack wait.
    """
    deadline = state.confirm_fire_deadline
    if state.phase != "armed" or deadline is None or now < deadline + grace:
        return None
    waited = (deadline - state.armed_at).total_seconds() if state.armed_at else 0.0
    reason = (
        f"alert {state.expected_alert!r} did not fire within {waited:g}s of arming "
        f"(confirm_fire_timeout_seconds at time_scale {state.time_scale:g})"
    )
    return RunFailed(
        run_id=state.run_id,
        producer=PRODUCER,
        occurred_at=now,
        stage=CONFIRM_FIRE_STAGE,
        reason=reason,
        verdict="aborted",
    )


def announcements(state: RunState) -> list[Event]:
    """The events the correlator owes for the state's current phase (deterministic ids)."""
    at = entered_at(state)
    if state.phase == "triggered" and state.trigger and state.alert_fired_at and at:
        triggered = RunTriggered(
            run_id=state.run_id,
            producer=PRODUCER,
            occurred_at=at,
            trigger=state.trigger,
            alert_fired_at=state.alert_fired_at,
        )
        return [triggered]
    prefix = f"{CONFIRM_FIRE_STAGE}: "
    if state.phase == "failed" and state.failure and state.failure.startswith(prefix) and at:
        failed = RunFailed(
            run_id=state.run_id,
            producer=PRODUCER,
            occurred_at=at,
            stage=CONFIRM_FIRE_STAGE,
            reason=state.failure.removeprefix(prefix),
            verdict="aborted",
        )
        return [failed]
    return []


def entered_at(state: RunState) -> datetime | None:
    """When the run entered its current phase."""
    return state.history[-1].at if state.history else None


def _reach(state: RunState, phase: RunPhase, at: datetime, **facts: object) -> RunState:
    changes = {
        name: value
        for name, value in facts.items()
        if value is not None and getattr(state, name) is None
    }
    if _RANK[phase] > _RANK[state.phase]:
        return state.advance(phase, at, **changes)
    return state.model_copy(update=changes) if changes else state


def _trigger(state: RunState, trigger: Trigger, clock: RunClock, now: datetime) -> RunState:
    primary = trigger.primary()
    window = timedelta(seconds=clock.correlation_window_seconds)
    signals = [primary]
    for signal in (*trigger.signals, *state.handoff_alerts):
        near = abs(signal.fired_at - trigger.fired_at) <= window
        if near and not any(_same(signal, kept) for kept in signals):
            signals.append(signal)
    attached = trigger.model_copy(update={"signals": signals})
    return state.advance("triggered", now, trigger=attached, alert_fired_at=trigger.fired_at)


def _late_signal(state: RunState, signal: TriggerSignal, clock: RunClock) -> RunState:
    """A signal after the trigger co-fired if it came within the window, before the brief."""
    fired = state.alert_fired_at
    if state.phase != "triggered" or fired is None:
        return state
    if abs(signal.fired_at - fired) > timedelta(seconds=clock.correlation_window_seconds):
        return state
    return _remember(state, signal)


def _remember(state: RunState, signal: TriggerSignal) -> RunState:
    if any(_same(known, signal) for known in state.handoff_alerts):
        return state
    return state.model_copy(update={"handoff_alerts": [*state.handoff_alerts, signal]})


def _same(one: TriggerSignal, other: TriggerSignal) -> bool:
    return one.alert_name == other.alert_name and one.labels == other.labels


def _stack_info(event: StackReady) -> StackInfo:
    return StackInfo(
        stack=event.stack,
        run_dir=event.run_dir,
        agent_endpoints=event.agent_endpoints,
        operator_endpoints=event.operator_endpoints,
        run_workspace=event.run_workspace,
        agent_network=event.agent_network,
        network_endpoints=event.network_endpoints,
    )
