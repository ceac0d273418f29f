"""The SREForge correlator: owns run state in KV, accepts `run.start`, joins triggers to
runs, enforces the confirm-fire deadline and fails runs whose work was dead-lettered.

`SERVICE` is its place on the bus; `fold`, `on_fired`, `on_resolved`, `overdue` and
`decide_start` are the pure state machine; `Correlator` binds them to a `RunLedger`.
"""

from sreforge_correlator._adapter import (
    COMMANDS_CONSUMER,
    DEADLETTERS_CONSUMER,
    EVENTS_CONSUMER,
    SERVICE,
    TRIGGERS_CONSUMER,
    CorrelatorService,
)
from sreforge_correlator._catalog import ScenarioCatalog
from sreforge_correlator._deadletter import DeadLetter, dead_letter_failure
from sreforge_correlator._errors import CorrelatorError, RunStateError, StartRejected
from sreforge_correlator._handlers import Correlator, StartOutcome
from sreforge_correlator._ledger import Change, RunLedger
from sreforge_correlator._machine import (
    CONFIRM_FIRE_STAGE,
    RunClock,
    announcements,
    fold,
    on_fired,
    on_resolved,
    overdue,
)
from sreforge_correlator._settings import CorrelatorSettings
from sreforge_correlator._start import Accepted, Rejected, StartPlan, decide_start, new_plan

__all__ = [
    "COMMANDS_CONSUMER",
    "CONFIRM_FIRE_STAGE",
    "DEADLETTERS_CONSUMER",
    "EVENTS_CONSUMER",
    "SERVICE",
    "TRIGGERS_CONSUMER",
    "Accepted",
    "Change",
    "Correlator",
    "CorrelatorError",
    "CorrelatorService",
    "CorrelatorSettings",
    "DeadLetter",
    "Rejected",
    "RunClock",
    "RunLedger",
    "RunStateError",
    "ScenarioCatalog",
    "StartOutcome",
    "StartPlan",
    "StartRejected",
    "announcements",
    "dead_letter_failure",
    "decide_start",
    "fold",
    "new_plan",
    "on_fired",
    "on_resolved",
    "overdue",
]
