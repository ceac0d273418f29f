"""Builders for Alertmanager payloads and feed signals, and a recording publish double."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sreforge_contracts import Event

Json = dict[str, Any]
MakeAlert = Callable[..., Json]
MakePayload = Callable[..., Json]

ROUTE = "r0ute7oken"
TOKEN = "s3cret-webhook-token"


def _alert(
    name: str = "HighLatency",
    *,
    status: str = "firing",
    fingerprint: str = "c0ffee0000000001",
    starts_at: str = "2026-11-29T07:00:00.123456789Z",
    severity: str = "critical",
    **labels: str,
) -> Json:
    ends_at = "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-29T07:05:00Z"
    return {
        "status": status,
        "labels": {"alertname": name, "severity": severity, "service": "books", **labels},
        "annotations": {"summary": f"{name} on books"},
        "startsAt": starts_at,
        "endsAt": ends_at,
        "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=up",
        "fingerprint": fingerprint,
    }


def _payload(*alerts: Json, group_key: str = '{}:{alertname="HighLatency"}', **extra: Any) -> Json:
    listed = list(alerts) or [_alert()]
    status = "firing" if any(a["status"] == "firing" for a in listed) else "resolved"
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "oncall-pager",
        "groupLabels": {"alertname": listed[0]["labels"]["alertname"]},
        "commonLabels": {"service": "books"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": listed,
        **extra,
    }


@pytest.fixture
def make_alert() -> MakeAlert:
    """`make_alert(name, status=, fingerprint=, starts_at=, severity=, **labels)`: one alert."""
    return _alert


@pytest.fixture
def make_payload() -> MakePayload:
    """`make_payload(*alerts, group_key=, **extra)`: a version-4 webhook message."""
    return _payload


def encode(body: Json) -> bytes:
    """JSON bytes as Alertmanager sends them."""
    return json.dumps(body).encode()


class RecordingPublish:
    """A publish double for the HTTP layer: records events, or fails with `error`."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.error: Exception | None = None

    async def __call__(self, event: Event) -> None:
        if self.error is not None:
            raise self.error
        self.events.append(event)


@pytest.fixture
def recording() -> RecordingPublish:
    """A fresh `RecordingPublish`."""
    return RecordingPublish()
