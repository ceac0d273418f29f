"""The bus wiring of the correlator service: which consumers feed which handlers."""

from __future__ import annotations

from sreforge_bus import ConsumerSpec, Route, Service, log_only
from sreforge_contracts import RUN_EVENTS_SUBJECTS, RUN_START_SUBJECT, parse_event, parse_run_start

__all__ = ["SERVICE"]

# Placeholder routes: each logs what arrives until the service's logic lands.
SERVICE = Service(
    name="correlator",
    routes=(
        Route(ConsumerSpec("correlator-commands", (RUN_START_SUBJECT,)), log_only, parse_run_start),
        Route(ConsumerSpec("correlator-events", RUN_EVENTS_SUBJECTS), log_only, parse_event),
    ),
)
