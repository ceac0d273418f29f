"""The Prometheus `/api/v1/alerts` fallback: newly firing and newly gone alerts become events."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sreforge_contracts import Event, TriggerFired, TriggerResolved
from sreforge_prom import Alert
from sreforge_trigger import AlertPoller, Ingest, alert_changes, label_fingerprint

from .conftest import ROUTE, RecordingPublish


def _answer(*alerts: dict[str, Any]) -> bytes:
    return json.dumps({"status": "success", "data": {"alerts": list(alerts)}}).encode()


def _alerts(*alerts: dict[str, Any]) -> list[Alert]:
    return [Alert.model_validate(alert) for alert in alerts]


def _alert(name: str = "HighLatency", state: str = "firing", **labels: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": "critical", **labels},
        "annotations": {"summary": "slow"},
        "state": state,
        "activeAt": "2026-11-29T07:00:00.5+00:00",
        "value": "1e+00",
    }


def test_label_fingerprint_matches_prometheus() -> None:
    """Same hash as Prometheus' model.LabelSet.Fingerprint (value read from Alertmanager 0.25)."""
    labels = {"alertname": "HighLatency", "severity": "critical", "service": "books"}
    assert label_fingerprint(labels) == "a5499de84b39b77d"
    assert label_fingerprint({}) == "cbf29ce484222325"
    assert label_fingerprint({"b": "2", "a": "1"}) == label_fingerprint({"a": "1", "b": "2"})
    assert label_fingerprint({"a": "1"}) != label_fingerprint({"a": "2"})


def test_first_poll_reports_firing_alerts_and_skips_pending() -> None:
    """Firing alerts are new; pending ones and ones without alertname are not reported."""
    polled = _alerts(_alert(), _alert("Warming", state="pending"), _alert(name="", job="x"))
    events, firing = alert_changes({}, polled, ROUTE)
    [event] = events
    assert isinstance(event, TriggerFired)
    assert event.trigger.source == "prometheus"
    assert event.trigger.alert_name == "HighLatency"
    assert event.trigger.route == ROUTE
    assert event.trigger.fingerprint == label_fingerprint(_alert()["labels"])
    assert len(firing) == 1


def test_steady_alerts_are_not_reported_again_and_gone_ones_resolve() -> None:
    """A second identical poll yields nothing; an alert that disappears yields TriggerResolved."""
    _, firing = alert_changes({}, _alerts(_alert(), _alert("Other")), None)
    again, firing = alert_changes(firing, _alerts(_alert(), _alert("Other")), None)
    assert again == []
    events, firing = alert_changes(firing, _alerts(_alert("Other")), None)
    [resolved] = events
    assert isinstance(resolved, TriggerResolved)
    assert resolved.trigger.alert_name == "HighLatency"
    assert next(iter(firing.values())).alert_name == "Other"


async def test_a_malformed_answer_is_a_failed_poll_not_a_crash() -> None:
    """An alert of an unknown state fails the poll (logged, retried), publishing nothing."""
    answer = _answer(_alert(state="exploded"))
    published: list[Event] = []

    async def publish(event: Event) -> None:
        published.append(event)

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=answer))
    async with httpx.AsyncClient(transport=transport) as client:
        poller = AlertPoller(
            "http://prometheus.test", Ingest(publish, timeout=1, memory=4), interval=1, http=client
        )
        assert await poller.poll_once(poller.client()) == 0
    assert published == []


async def test_poll_once_publishes_changes_and_retries_after_a_failed_publish() -> None:
    """A failed publish leaves the firing set unchanged, so the next poll reports again."""
    recording = RecordingPublish()
    answers = [_answer(_alert()), _answer(_alert()), _answer()]

    def respond(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/alerts"
        return httpx.Response(200, content=answers.pop(0))

    ingest = Ingest(recording, timeout=1.0, memory=16)
    async with httpx.AsyncClient(transport=httpx.MockTransport(respond)) as client:
        poller = AlertPoller("http://prometheus.test/", ingest, interval=1.0, http=client)
        prometheus = poller.client()
        recording.error = OSError("bus down")
        assert await poller.poll_once(prometheus) == 0
        recording.error = None
        assert await poller.poll_once(prometheus) == 1
        assert await poller.poll_once(prometheus) == 1
    assert [type(e) for e in recording.events] == [TriggerFired, TriggerResolved]


async def test_poll_once_survives_an_unreachable_prometheus() -> None:
    """A connection error is logged and yields no events."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    published: list[Event] = []

    async def publish(event: Event) -> None:
        published.append(event)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        ingest = Ingest(publish, timeout=1, memory=4)
        poller = AlertPoller("http://prometheus.test", ingest, interval=1, http=client)
        assert await poller.poll_once(poller.client()) == 0
    assert published == []
