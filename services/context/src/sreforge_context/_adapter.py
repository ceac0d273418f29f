"""The bus wiring of the context service: RunTriggered in, BriefReady or RunFailed out."""

from __future__ import annotations

from sreforge_bus import ConsumerSpec, Route, Service
from sreforge_contracts import RunTriggered

from sreforge_context._brief import BriefHandler
from sreforge_context._settings import ContextSettings

__all__ = ["SERVICE", "build_service"]

CONSUMER = ConsumerSpec("context", ("sreforge.run.*.RunTriggered",))


def build_service(settings: ContextSettings | None = None) -> Service:
    """The context service; `settings` default to the environment, read on first use."""
    handler = BriefHandler(settings=settings, max_deliver=CONSUMER.max_deliver)
    return Service(name="context", routes=(Route.on(CONSUMER, RunTriggered, handler),))


SERVICE = build_service()
