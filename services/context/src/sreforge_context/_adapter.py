"""The bus wiring of the context service: which consumers feed which handlers."""

from __future__ import annotations

from sreforge_bus import ConsumerSpec, Route, Service, log_only
from sreforge_contracts import parse_event

__all__ = ["SERVICE"]

# Placeholder routes: each logs what arrives until the service's logic lands.
SERVICE = Service(
    name="context",
    routes=(
        Route(ConsumerSpec("context", ("sreforge.run.*.RunTriggered",)), log_only, parse_event),
    ),
)
