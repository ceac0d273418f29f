"""The SREForge trigger service: Alertmanager webhooks, external feeds and a Prometheus
poller become `TriggerFired`/`TriggerResolved` events on the bus.

`SERVICE` is what the engine runs; `create_app` is the HTTP receiver on its own, with
the publish coroutine injected; the pure parsers and converters are exported for tests
and for tools that replay payloads.
"""

from sreforge_trigger._adapter import SERVICE, Listening, TriggerService
from sreforge_trigger._app import ROUTE_PATTERN, create_app
from sreforge_trigger._errors import (
    BodyTooLarge,
    PayloadError,
    PublishFailed,
    TokenError,
    TriggerError,
)
from sreforge_trigger._events import PRODUCER, label_fingerprint
from sreforge_trigger._feed import FeedSignal, feed_event, parse_feed
from sreforge_trigger._ingest import Ingest, IngestResult, Publish
from sreforge_trigger._poller import POLLER_SOURCE, AlertPoller, alert_changes
from sreforge_trigger._settings import TriggerSettings
from sreforge_trigger._webhook import (
    ALERTMANAGER_SOURCE,
    Alert,
    WebhookPayload,
    parse_webhook,
    webhook_events,
)

__all__ = [
    "ALERTMANAGER_SOURCE",
    "POLLER_SOURCE",
    "PRODUCER",
    "ROUTE_PATTERN",
    "SERVICE",
    "Alert",
    "AlertPoller",
    "BodyTooLarge",
    "FeedSignal",
    "Ingest",
    "IngestResult",
    "Listening",
    "PayloadError",
    "Publish",
    "PublishFailed",
    "TokenError",
    "TriggerError",
    "TriggerService",
    "TriggerSettings",
    "WebhookPayload",
    "alert_changes",
    "create_app",
    "feed_event",
    "label_fingerprint",
    "parse_feed",
    "parse_webhook",
    "webhook_events",
]
