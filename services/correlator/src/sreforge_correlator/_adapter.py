"""The correlator on the bus: four durable consumers and a deadline sweep.

- `correlator-commands` (`sreforge.run.start`): validate, create the run, publish
  RunRequested or RunRejected, reply to the sender.
- `correlator-events` (`sreforge.run.*.*`): fold the event into the run's state; a
  FaultArmed may publish RunTriggered (its alert was handled first).
- `correlator-triggers` (`sreforge.trigger.>`): join the signal to its run by route;
  the expected alert of an armed run publishes RunTriggered.
- `correlator-deadletters` (`sreforge.deadletter.>`): a service gave up on a run's
  message; fail that run now (RunFailed{stage=<durable>, verdict=error}).

The sweep (every `sweep_interval_seconds`) fails armed runs past their confirm-fire
deadline and re-publishes a recent transition's event once per process, so a
correlator killed between its KV write and its publish still announces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog
from sreforge_bus import (
    DEADLETTER_PREFIX,
    Bus,
    BusError,
    ConsumerSpec,
    Context,
    Delivery,
    Emit,
    Route,
    Service,
    parse_as,
)
from sreforge_contracts import (
    RUN_EVENTS_SUBJECTS,
    RUN_START_SUBJECT,
    Event,
    RunRequested,
    TriggerFired,
    TriggerResolved,
    parse_event,
    utcnow,
)

from sreforge_correlator._catalog import ScenarioCatalog
from sreforge_correlator._deadletter import DeadLetter
from sreforge_correlator._errors import CorrelatorError
from sreforge_correlator._handlers import Correlator
from sreforge_correlator._ledger import RunLedger
from sreforge_correlator._settings import CorrelatorSettings

__all__ = [
    "COMMANDS_CONSUMER",
    "DEADLETTERS_CONSUMER",
    "EVENTS_CONSUMER",
    "SERVICE",
    "TRIGGERS_CONSUMER",
    "CorrelatorService",
]

log = structlog.get_logger("sreforge.correlator")

COMMANDS_CONSUMER = ConsumerSpec("correlator-commands", (RUN_START_SUBJECT,))
EVENTS_CONSUMER = ConsumerSpec("correlator-events", RUN_EVENTS_SUBJECTS)
TRIGGERS_CONSUMER = ConsumerSpec("correlator-triggers", ("sreforge.trigger.>",))
DEADLETTERS_CONSUMER = ConsumerSpec("correlator-deadletters", (f"{DEADLETTER_PREFIX}>",))


def _body(data: bytes) -> bytes:
    """`run.start` bodies are validated by the handler, so a malformed one still gets a reply."""
    return data


def _message_key(delivery: Delivery) -> str:
    """Names one stored `run.start` across its redeliveries (sequence plus content)."""
    digest = hashlib.sha256(delivery.data).hexdigest()[:16]
    return f"{delivery.stream_seq}-{digest}"


class _Announced:
    """Event ids this process published recently, so the sweep re-publishes each only once."""

    def __init__(self) -> None:
        self._at: dict[str, datetime] = {}

    def owed(self, events: Sequence[Event], now: datetime, keep: timedelta) -> list[Event]:
        self._at = {key: at for key, at in self._at.items() if now - at <= keep}
        return [event for event in events if event.event_id not in self._at]

    def mark(self, events: Sequence[Event], now: datetime) -> None:
        self._at.update((event.event_id, now) for event in events)


@dataclass(frozen=True)
class CorrelatorService(Service):
    """The correlator's routes and its deadline sweep; settings from the env unless given."""

    name: str = "correlator"
    settings: CorrelatorSettings | None = None
    _announced: _Announced = field(default_factory=_Announced, compare=False, repr=False)
    _loaded: list[CorrelatorSettings] = field(default_factory=list, compare=False, repr=False)
    _finished: set[str] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        routes = (
            # No size limit in the worker: decide_start refuses an oversize body itself, so
            # its sender gets a RunRejected naming the limit instead of a silent dead letter.
            Route(COMMANDS_CONSUMER, self._on_start, _body, max_bytes=None),
            Route(EVENTS_CONSUMER, self._on_event, parse_event),
            Route(TRIGGERS_CONSUMER, self._on_trigger, parse_as(TriggerFired, TriggerResolved)),
            Route(DEADLETTERS_CONSUMER, self._on_dead_letter, _body),
        )
        object.__setattr__(self, "routes", routes)
        object.__setattr__(self, "tasks", (self._sweep,))

    @property
    def current_settings(self) -> CorrelatorSettings:
        """The settings in force (read from `SREFORGE_CORRELATOR_*` on first use)."""
        if self.settings is not None:
            return self.settings
        if not self._loaded:
            self._loaded.append(CorrelatorSettings())
        return self._loaded[0]

    def correlator(self, bus: Bus) -> Correlator:
        """The handlers bound to `bus`'s run store."""
        settings = self.current_settings
        catalog = ScenarioCatalog(settings.use_cases, settings.scripts_dir)
        return Correlator(RunLedger(bus.runs), catalog, settings, self._finished)

    async def _on_start(self, body: bytes, context: Context) -> Emit:
        outcome = await self.correlator(context.bus).start(
            body, _message_key(context.delivery), utcnow()
        )
        if isinstance(outcome.event, RunRequested):
            context.log.info("run.accepted", run_id=outcome.event.run_id)
        else:
            reason = outcome.reply.error
            context.log.info("run.rejected", run_id=outcome.event.run_id, reason=reason)
        # The event is stored before the reply, so a follower sees it at once.
        return Emit(events=[outcome.event], reply=outcome.reply)

    async def _on_event(self, event: Event, context: Context) -> Sequence[Event]:
        return self._publishing(await self.correlator(context.bus).run_event(event))

    async def _on_trigger(
        self, event: TriggerFired | TriggerResolved, context: Context
    ) -> Sequence[Event]:
        return self._publishing(await self.correlator(context.bus).trigger(event, utcnow()))

    async def _on_dead_letter(self, body: bytes, context: Context) -> Sequence[Event]:
        delivery = context.delivery
        letter = DeadLetter.read(body, delivery.headers, delivery.subject)
        events = await self.correlator(context.bus).dead_letter(letter, utcnow())
        facts = {"durable": letter.durable, "subject": letter.subject, "error": letter.error}
        if events:
            context.log.error("deadletter.run_failed", run_id=events[0].run_id, **facts)
        else:
            context.log.warning("deadletter.no_live_run", run_id=letter.run_id, **facts)
        return self._publishing(events)

    def _publishing(self, events: list[Event]) -> list[Event]:
        self._announced.mark(events, utcnow())
        return events

    async def _sweep(self, bus: Bus, stop: asyncio.Event) -> None:
        """The deadline sweep, the service's background task (see the module docstring)."""
        settings = self.current_settings
        keep = timedelta(seconds=2 * settings.announce_window_seconds)
        while not stop.is_set():
            now = utcnow()
            try:
                due = await self.correlator(bus).sweep(now)
                for event in self._announced.owed(due, now, keep):
                    await bus.publish(event)
                    self._announced.mark([event], now)
            except (BusError, CorrelatorError) as err:
                log.warning("correlator.sweep_failed", error=repr(err))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.sweep_interval_seconds)


SERVICE = CorrelatorService()
