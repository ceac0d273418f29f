"""Alertmanager webhook payloads (version 4) parse strictly and become one event per alert."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sreforge_contracts import TRIGGER_FIRED_SUBJECT, TriggerFired, TriggerResolved
from sreforge_trigger import PayloadError, parse_webhook, webhook_events

from .conftest import ROUTE, MakeAlert, MakePayload, encode


def test_firing_alert_becomes_a_normalised_trigger_fired(make_payload: MakePayload) -> None:
    """Every Trigger field comes from the alert; the route rides along; fired_at = startsAt."""
    [event] = webhook_events(parse_webhook(encode(make_payload())), ROUTE)
    assert isinstance(event, TriggerFired)
    trigger = event.trigger
    assert trigger.source == "alertmanager"
    assert trigger.alert_name == "HighLatency"
    assert trigger.severity == "critical"
    assert trigger.labels == {
        "alertname": "HighLatency",
        "severity": "critical",
        "service": "books",
    }
    assert trigger.route == ROUTE
    assert trigger.annotations == {"summary": "HighLatency on books"}
    assert trigger.fired_at == datetime(2026, 11, 29, 7, 0, 0, 123456, tzinfo=UTC)
    assert trigger.fingerprint == "c0ffee0000000001"
    assert trigger.status == "firing"
    assert trigger.signals == [trigger.primary()]
    assert event.producer == "trigger"
    assert event.run_id is None
    assert event.subject == TRIGGER_FIRED_SUBJECT
    assert event.event_id.startswith("trigger.fired.")


def test_resolved_alert_becomes_trigger_resolved_with_its_own_id(
    make_payload: MakePayload, make_alert: MakeAlert
) -> None:
    """The resolved notice of an occurrence is a different event than its firing."""
    [fired] = webhook_events(parse_webhook(encode(make_payload(make_alert()))), ROUTE)
    resolved_body = make_payload(make_alert(status="resolved"))
    [resolved] = webhook_events(parse_webhook(encode(resolved_body)), ROUTE)
    assert isinstance(resolved, TriggerResolved)
    assert resolved.trigger.status == "resolved"
    assert resolved.trigger.fired_at == fired.trigger.fired_at
    assert resolved.event_id.startswith("trigger.resolved.")
    assert resolved.event_id != fired.event_id


def test_multi_alert_group_gives_one_event_per_alert_in_order(
    make_payload: MakePayload, make_alert: MakeAlert
) -> None:
    """A group of three alerts (one resolved) yields three events with distinct ids."""
    body = make_payload(
        make_alert(fingerprint="a" * 16, instance="a"),
        make_alert(fingerprint="b" * 16, instance="b", status="resolved"),
        make_alert("ErrorBudgetBurn", fingerprint="c" * 16, severity="warning"),
    )
    events = webhook_events(parse_webhook(encode(body)), ROUTE)
    assert [type(e).__name__ for e in events] == [
        "TriggerFired",
        "TriggerResolved",
        "TriggerFired",
    ]
    assert [e.trigger.fingerprint for e in events] == ["a" * 16, "b" * 16, "c" * 16]
    assert events[2].trigger.alert_name == "ErrorBudgetBurn"
    assert events[2].trigger.severity == "warning"
    assert len({e.event_id for e in events}) == 3


def test_event_id_is_groupkey_fingerprint_startsat_status_and_route(
    make_payload: MakePayload, make_alert: MakeAlert
) -> None:
    """A re-sent notification is the same event; each identity part changes the id."""

    def event_id(route: str = ROUTE, **changes: str) -> str:
        group_key = changes.pop("group_key", '{}:{alertname="HighLatency"}')
        body = make_payload(make_alert(**changes), group_key=group_key)
        # Annotations are not identity: a re-send with new wording is the same occurrence.
        body["alerts"][0]["annotations"] = {"summary": changes.get("fingerprint", "x")}
        return webhook_events(parse_webhook(encode(body)), route)[0].event_id

    base = event_id()
    assert event_id() == base
    assert event_id(route="other-route") != base
    assert event_id(group_key="{}:{other}") != base
    assert event_id(fingerprint="d" * 16) != base
    assert event_id(starts_at="2026-11-29T07:01:00Z") != base
    assert event_id(status="resolved") != base


def test_an_alert_listed_twice_in_one_notification_yields_one_event(
    make_payload: MakePayload, make_alert: MakeAlert
) -> None:
    """Duplicates within one body collapse to one event."""
    events = webhook_events(parse_webhook(encode(make_payload(make_alert(), make_alert()))), ROUTE)
    assert len(events) == 1


def test_truncated_alerts_and_unknown_fields_are_accepted(make_payload: MakePayload) -> None:
    """`truncatedAlerts` is read; fields newer Alertmanagers add are ignored."""
    body = make_payload(truncatedAlerts=7, newTopLevelField={"x": 1})
    body["alerts"][0]["newAlertField"] = "y"
    payload = parse_webhook(encode(body))
    assert payload.truncated_alerts == 7
    assert len(webhook_events(payload, ROUTE)) == 1


def test_empty_alert_list_gives_no_events(make_payload: MakePayload) -> None:
    """A group with no alerts listed (all truncated) is valid and yields nothing."""
    body = make_payload(truncatedAlerts=3)
    body["alerts"] = []
    assert webhook_events(parse_webhook(encode(body)), ROUTE) == []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("groupKey"), "groupKey"),
        (lambda b: b.update(version="3"), "version"),
        (lambda b: b.update(truncatedAlerts="2"), "truncatedAlerts"),
        (lambda b: b.update(truncatedAlerts=-1), "truncatedAlerts"),
        (lambda b: b.update(alerts={"not": "a list"}), "alerts"),
        (lambda b: b["alerts"][0].pop("fingerprint"), "alerts.0.fingerprint"),
        (lambda b: b["alerts"][0].update(status="pending"), "alerts.0.status"),
        (lambda b: b["alerts"][0].update(startsAt="yesterday"), "alerts.0.startsAt"),
        (lambda b: b["alerts"][0].update(startsAt="2026-11-29T07:00:00"), "alerts.0.startsAt"),
        (lambda b: b["alerts"][0]["labels"].update(severity=3), "alerts.0.labels.severity"),
        (lambda b: b["alerts"][0]["labels"].pop("alertname"), "alerts.0.labels.alertname"),
    ],
)
def test_malformed_payload_error_names_the_field(
    make_payload: MakePayload, mutate: object, field: str
) -> None:
    """Wrong types, missing fields and bad values are rejected naming the field."""
    body = make_payload()
    assert callable(mutate)
    mutate(body)
    with pytest.raises(PayloadError) as caught:
        parse_webhook(encode(body))
    assert caught.value.field == field
    assert field in str(caught.value)
    assert not caught.value.malformed


@pytest.mark.parametrize("body", [b"{not json", b"", b'"a string"', b"[]"])
def test_non_object_bodies_are_rejected(body: bytes) -> None:
    """Bad JSON is flagged malformed; JSON that is not an object is a type error."""
    with pytest.raises(PayloadError) as caught:
        parse_webhook(body)
    assert caught.value.malformed == (body in (b"{not json", b""))
    assert "alertmanager webhook" in str(caught.value)


def test_payload_error_message_is_one_line_per_problem(make_payload: MakePayload) -> None:
    """Several problems are all reported, first field first."""
    body = make_payload()
    del body["receiver"]
    body["alerts"][0]["labels"] = ["x"]
    with pytest.raises(PayloadError) as caught:
        parse_webhook(json.dumps(body).encode())
    message = str(caught.value)
    assert "receiver: required field missing" in message
    assert "alerts.0.labels" in message
