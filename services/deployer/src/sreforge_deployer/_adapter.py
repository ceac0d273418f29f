"""The bus wiring of the deployer service: which consumers feed which handlers."""

from __future__ import annotations

from sreforge_bus import ConsumerSpec, Route, Service, log_only
from sreforge_contracts import parse_event

__all__ = ["SERVICE"]

# Placeholder routes: each logs what arrives until the service's logic lands.
SERVICE = Service(
    name="deployer",
    routes=(
        Route(
            ConsumerSpec(
                "deployer",
                (
                    "sreforge.run.*.RunRequested",
                    "sreforge.run.*.Submitted",
                    "sreforge.run.*.Scored",
                    "sreforge.run.*.RunFailed",
                ),
            ),
            log_only,
            parse_event,
        ),
    ),
)
