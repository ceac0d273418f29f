"""The correlator's handlers: decisions from `_start` and `_machine`, kept in the ledger.

Each returns the events its input caused; the adapter publishes them. Time comes in
as `now`, so every handler can be driven by a test clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sreforge_contracts import (
    BriefReady,
    CiResult,
    Deployed,
    Determinism,
    Event,
    FaultArmed,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunStartReply,
    RunState,
    Scored,
    StackReady,
    Submitted,
    TriggerFired,
    TriggerResolved,
)

from sreforge_correlator._catalog import ScenarioCatalog
from sreforge_correlator._deadletter import DeadLetter, dead_letter_failure, failed_by
from sreforge_correlator._errors import RunStateError, StartRejected
from sreforge_correlator._hosts import host_lost, host_lost_again
from sreforge_correlator._ledger import RunLedger
from sreforge_correlator._machine import (
    RunClock,
    announcements,
    entered_at,
    fold,
    on_fired,
    on_resolved,
    overdue,
)
from sreforge_correlator._settings import CorrelatorSettings
from sreforge_correlator._start import (
    Accepted,
    Rejected,
    StartPlan,
    decide_start,
    duplicate_run,
    new_plan,
)

__all__ = ["FOLDED", "Correlator", "StartOutcome"]

log = structlog.get_logger("sreforge.correlator")

FOLDED = (
    StackReady,
    FaultArmed,
    BriefReady,
    Submitted,
    CiResult,
    Deployed,
    Scored,
    RunFailed,
    Recorded,
)
"""The run events that move a run's state."""


@dataclass(frozen=True)
class StartOutcome:
    """What one `run.start` caused: the event to publish and the answer to send back."""

    event: RunRequested | RunRejected
    reply: RunStartReply


class Correlator:
    """Accepts runs, folds their events, joins triggers to them and enforces deadlines."""

    def __init__(
        self,
        ledger: RunLedger,
        catalog: ScenarioCatalog,
        settings: CorrelatorSettings,
        finished: set[str] | None = None,
    ) -> None:
        self._ledger = ledger
        self._catalog = catalog
        self._settings = settings
        self._finished = finished if finished is not None else set()
        """Runs the sweep may skip for good: ended, and past their announce window."""

    async def start(self, body: bytes, message: str, now: datetime) -> StartOutcome:
        """Decide `run.start` message `message` (the same way on every delivery of it)."""
        plan = await self._ledger.plan(message, new_plan(now))
        decision = decide_start(
            body,
            plan,
            self._catalog.manifest,
            self._settings.known_agents,
            self._catalog.check_script,
        )
        if isinstance(decision, Accepted):
            decision = await self._create(plan, decision)
        return StartOutcome(event=decision.event, reply=decision.reply)

    async def _create(self, plan: StartPlan, accepted: Accepted) -> Accepted | Rejected:
        if not await self._ledger.create(accepted.state):
            existing = await self._ledger.load(accepted.state.run_id)
            if existing is None or existing.alert_route != plan.alert_route:
                return duplicate_run(plan, accepted)
            # else: this very command created it on an earlier delivery.
        await self._ledger.index_route(plan.alert_route, accepted.state.run_id)
        return accepted

    async def run_event(self, event: Event) -> list[Event]:
        """Fold a run event into its run's state; a FaultArmed may trigger a held alert."""
        if event.run_id is None or not isinstance(event, FOLDED):
            return []
        state = await self._ledger.load(event.run_id)
        if state is None:
            return []  # not a run of ours (a rejected start has no state)
        clock = self._clock(state)
        change = await self._ledger.change(event.run_id, lambda s: fold(s, event, clock))
        if change is not None and isinstance(event, Recorded) and change.after.phase == "recorded":
            await self._ledger.forget(change.after)  # also on a redelivery: a crash may have cut it
        if change is None or not isinstance(event, FaultArmed):
            return []
        return announcements(change.after) if change.after.phase == "triggered" else []

    async def trigger(self, event: TriggerFired | TriggerResolved, now: datetime) -> list[Event]:
        """Join a signal to the run that owns its route; announce the run if it triggered it."""
        trigger = event.trigger
        if trigger.received_at is None:  # when the page reached the engine, for the record
            trigger = trigger.model_copy(update={"received_at": event.occurred_at})
        run_id = await self._ledger.run_of_route(trigger.route) if trigger.route else None
        state = await self._ledger.load(run_id) if run_id else None
        if run_id is None or state is None:
            return []
        if isinstance(event, TriggerResolved):
            await self._ledger.change(run_id, lambda s: on_resolved(s, trigger))
            return []
        clock = self._clock(state)
        change = await self._ledger.change(run_id, lambda s: on_fired(s, trigger, clock, now))
        after = change.after if change else None
        if after is None or after.phase != "triggered" or after.trigger is None:
            return []
        is_ours = after.trigger.primary() == trigger.primary()  # not a co-firing signal
        return announcements(after) if is_ours else []

    async def dead_letter(self, letter: DeadLetter, now: datetime) -> list[Event]:
        """Fail the run a dead-lettered message belonged to, with verdict error.

        Nothing when the dead letter names no known run (a malformed message, an
        unknown route) or the run already ended for another reason. The run is
        moved to `failed` by CAS before the RunFailed is returned, so a racing
        verdict cannot also end it; a redelivery after a crash in between finds
        this very failure in the state and returns the same RunFailed again.
        """
        run_id = letter.run_id
        if run_id is None and letter.route is not None:
            run_id = await self._ledger.run_of_route(letter.route)
        state = await self._ledger.load(run_id) if run_id else None
        if run_id is None or state is None:
            return []
        failed = dead_letter_failure(letter, run_id, now)
        clock = self._clock(state)
        change = await self._ledger.change(run_id, lambda s: fold(s, failed, clock))
        if change is None or not (change.changed or failed_by(change.before, failed)):
            return []
        return [failed]

    async def sweep(self, now: datetime) -> list[Event]:
        """Fail runs whose worker host is gone and armed runs past their confirm-fire
        deadline; re-announce recent transitions."""
        owed: list[Event] = []
        for run_id in await self._ledger.run_ids():
            if run_id in self._finished:
                continue
            try:
                state = await self._ledger.load(run_id)
            except RunStateError:
                continue  # a key of another service that happens to look like a run id
            if state is None:
                continue
            if not state.terminal and (lost := await self._fail_host_lost(state, now)):
                owed += lost
            elif overdue(state, now, self._grace) is not None:
                owed += await self._fail_overdue(state, now)
            elif self._recent(state, now):
                owed += announcements(state)
                owed += [again] if (again := host_lost_again(state)) else []
            elif state.terminal:
                self._finished.add(run_id)
        return owed

    async def _fail_host_lost(self, state: RunState, now: datetime) -> list[Event]:
        owner = await self._ledger.owner(state.run_id)
        if owner is None:
            return []
        lease = await self._ledger.lease(owner.host)
        if host_lost(state, owner, lease, now) is None:
            return []
        clock = self._clock(state)

        def fail(current: RunState) -> RunState:
            failure = host_lost(current, owner, lease, now)
            return current if failure is None else fold(current, failure, clock)

        change = await self._ledger.change(state.run_id, fail)
        if change is None or not change.changed:
            return []
        log.error("correlator.worker_host_lost", run_id=state.run_id, reason=change.after.failure)
        again = host_lost_again(change.after)
        return [again] if again else []

    async def _fail_overdue(self, state: RunState, now: datetime) -> list[Event]:
        clock = self._clock(state)

        def fail(current: RunState) -> RunState:
            failure = overdue(current, now, self._grace)
            return current if failure is None else fold(current, failure, clock)

        change = await self._ledger.change(state.run_id, fail)
        if change is None or not change.changed:
            return []
        log.error(
            "correlator.confirm_fire_missed", run_id=state.run_id, reason=change.after.failure
        )
        return announcements(change.after)

    @property
    def _grace(self) -> timedelta:
        return timedelta(seconds=self._settings.confirm_fire_grace_seconds)

    def _recent(self, state: RunState, now: datetime) -> bool:
        at = entered_at(state)
        window = timedelta(seconds=self._settings.announce_window_seconds)
        return at is not None and now - at <= window

    def _clock(self, state: RunState) -> RunClock:
        scale = state.time_scale
        patch = False
        try:
            manifest = self._catalog.manifest(state.scenario_id)
            determinism, patch = manifest.determinism, manifest.profile == "patch"
        except StartRejected:
            determinism = Determinism()  # the scenario left the disk mid-run: the defaults
        return RunClock(
            confirm_fire_seconds=determinism.confirm_fire_timeout_seconds * scale,
            agent_budget_seconds=self._settings.agent_budget_seconds,
            correlation_window_seconds=self._settings.correlation_window_seconds * scale,
            triggered_at_arm=patch,
        )
