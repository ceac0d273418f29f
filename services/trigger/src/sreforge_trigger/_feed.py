"""A generic external feed signal (our own JSON shape) and its event: pure, no I/O."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from sreforge_contracts import Trigger

from sreforge_trigger._errors import PayloadError
from sreforge_trigger._events import TriggerEvent, trigger_event

__all__ = ["FeedSignal", "feed_event", "parse_feed"]


class FeedSignal(BaseModel):
    """One signal from an external feed; `source` names the feed (e.g. `pagerduty`).

    Unknown fields are an error: this shape is ours, so a typo should not pass.
    `route`, when given, must match the route in the URL it was posted to.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    source: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1)
    severity: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    fired_at: AwareDatetime
    status: Literal["firing", "resolved"] = "firing"
    fingerprint: str | None = None
    route: str | None = None


def parse_feed(body: bytes, route: str) -> FeedSignal:
    """Validate a feed body posted to `route`; `PayloadError` names the field at fault."""
    try:
        signal = FeedSignal.model_validate_json(body)
    except ValidationError as err:
        raise PayloadError.from_validation(err, "feed signal") from None
    if signal.route is not None and signal.route != route:
        raise PayloadError(
            f"feed signal: route: {signal.route!r} does not match the URL's route", field="route"
        )
    return signal


def feed_event(signal: FeedSignal, route: str) -> TriggerEvent:
    """The `TriggerFired`/`TriggerResolved` for `signal`, named by the trigger's content hash."""
    trigger = Trigger(
        source=signal.source,
        alert_name=signal.name,
        severity=signal.severity,
        labels=dict(signal.labels),
        route=route,
        annotations=signal.annotations,
        fired_at=signal.fired_at,
        fingerprint=signal.fingerprint,
        status=signal.status,
    )
    return trigger_event(trigger.model_copy(update={"signals": [trigger.primary()]}))
