"""Alertmanager's webhook payload (version "4") and its events: pure, no I/O.

Tolerant of fields newer Alertmanagers add, strict on the types and fields it
always sends. One event per alert, named by groupKey + fingerprint + startsAt +
status (and the route), so a re-sent notification is the same event.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from sreforge_contracts import Trigger

from sreforge_trigger._errors import PayloadError
from sreforge_trigger._events import TriggerEvent, occurrence_id, trigger_event

__all__ = ["ALERTMANAGER_SOURCE", "Alert", "WebhookPayload", "parse_webhook", "webhook_events"]

ALERTMANAGER_SOURCE = "alertmanager"

AlertStatus = Literal["firing", "resolved"]


class _Inbound(BaseModel):
    """Strict types, unknown fields ignored (newer Alertmanagers add some)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class Alert(_Inbound):
    """One alert of a notification."""

    status: AlertStatus
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: AwareDatetime = Field(alias="startsAt")
    ends_at: AwareDatetime | None = Field(default=None, alias="endsAt")
    generator_url: str = Field(default="", alias="generatorURL")
    fingerprint: str = Field(min_length=1)


class WebhookPayload(_Inbound):
    """A webhook notification: one alert group, as Alertmanager's `webhook.Message` sends it."""

    version: Literal["4"]
    group_key: str = Field(alias="groupKey")
    truncated_alerts: int = Field(default=0, ge=0, alias="truncatedAlerts")
    receiver: str
    status: AlertStatus
    alerts: list[Alert]
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")
    common_labels: dict[str, str] = Field(default_factory=dict, alias="commonLabels")
    common_annotations: dict[str, str] = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str = Field(default="", alias="externalURL")


def parse_webhook(body: bytes) -> WebhookPayload:
    """Validate a webhook body; `PayloadError` names the first field at fault."""
    try:
        payload = WebhookPayload.model_validate_json(body)
    except ValidationError as err:
        raise PayloadError.from_validation(err, "alertmanager webhook") from None
    for index, alert in enumerate(payload.alerts):
        if not alert.labels.get("alertname"):
            raise PayloadError(
                f"alertmanager webhook: alerts.{index}.labels.alertname: required label missing",
                field=f"alerts.{index}.labels.alertname",
            )
    return payload


def webhook_events(payload: WebhookPayload, route: str) -> list[TriggerEvent]:
    """One `TriggerFired`/`TriggerResolved` per alert, in payload order, duplicates dropped."""
    events: dict[str, TriggerEvent] = {}
    for alert in payload.alerts:
        event = _alert_event(alert, payload.group_key, route)
        events.setdefault(event.event_id, event)
    return list(events.values())


def _alert_event(alert: Alert, group_key: str, route: str) -> TriggerEvent:
    trigger = Trigger(
        source=ALERTMANAGER_SOURCE,
        alert_name=alert.labels["alertname"],
        severity=alert.labels.get("severity"),
        labels=dict(alert.labels),
        route=route,
        annotations=alert.annotations,
        fired_at=alert.starts_at,
        fingerprint=alert.fingerprint,
        status=alert.status,
    )
    trigger = trigger.model_copy(update={"signals": [trigger.primary()]})
    event_id = occurrence_id(
        alert.status,
        ALERTMANAGER_SOURCE,
        route,
        group_key,
        alert.fingerprint,
        alert.starts_at.isoformat(),
        alert.status,
    )
    return trigger_event(trigger, event_id)
