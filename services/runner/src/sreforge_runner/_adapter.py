"""The bus wiring of the runner service: BriefReady in, Submitted (or RunFailed) out."""

from __future__ import annotations

from sreforge_bus import ConsumerSpec, Route, Service
from sreforge_contracts import BriefReady

from sreforge_runner._handoff import RunnerHandler
from sreforge_runner._settings import RunnerSettings

__all__ = ["CONSUMER", "SERVICE", "build_service"]

CONSUMER = ConsumerSpec("runner", ("sreforge.run.*.BriefReady",))


def build_service(settings: RunnerSettings | None = None) -> Service:
    """The runner service; `settings` default to the environment, read on first use."""
    handler = RunnerHandler(settings=settings, max_deliver=CONSUMER.max_deliver)
    return Service(name="runner", routes=(Route.on(CONSUMER, BriefReady, handler),))


SERVICE = build_service()
