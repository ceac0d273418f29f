"""External feed signals: our own strict JSON shape, one event with the feed's source."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sreforge_contracts import TriggerFired, TriggerResolved
from sreforge_trigger import PayloadError, feed_event, parse_feed

from .conftest import ROUTE


def _signal(**changes: Any) -> bytes:
    body: dict[str, Any] = {
        "source": "statuspage",
        "name": "CheckoutDegraded",
        "severity": "page",
        "labels": {"service": "books"},
        "annotations": {"summary": "checkout slow"},
        "fired_at": "2026-11-29T07:00:00+00:00",
        **changes,
    }
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def test_feed_signal_becomes_trigger_fired_with_its_source() -> None:
    """Source, name, severity, labels (plus route), annotations and time carry over."""
    event = feed_event(parse_feed(_signal(), ROUTE), ROUTE)
    assert isinstance(event, TriggerFired)
    assert event.trigger.source == "statuspage"
    assert event.trigger.alert_name == "CheckoutDegraded"
    assert event.trigger.severity == "page"
    assert event.trigger.labels == {"service": "books"}
    assert event.trigger.route == ROUTE
    assert event.trigger.annotations == {"summary": "checkout slow"}
    assert event.trigger.fired_at.isoformat() == "2026-11-29T07:00:00+00:00"


def test_resolved_feed_signal_becomes_trigger_resolved() -> None:
    """`status: resolved` gives a TriggerResolved with a different id than the firing."""
    fired = feed_event(parse_feed(_signal(), ROUTE), ROUTE)
    resolved = feed_event(parse_feed(_signal(status="resolved"), ROUTE), ROUTE)
    assert isinstance(resolved, TriggerResolved)
    assert resolved.event_id != fired.event_id


def test_same_signal_twice_is_the_same_event() -> None:
    """A re-sent signal dedupes: same id; a different route is a different occurrence."""
    first = feed_event(parse_feed(_signal(), ROUTE), ROUTE)
    again = feed_event(parse_feed(_signal(annotations={"summary": "reworded"}), ROUTE), ROUTE)
    elsewhere = feed_event(parse_feed(_signal(), "other"), "other")
    assert first.event_id == again.event_id
    assert first.event_id != elsewhere.event_id


def test_route_in_body_must_match_the_url() -> None:
    """A body naming another route is refused, naming `route`; the same route is fine."""
    assert parse_feed(_signal(route=ROUTE), ROUTE).route == ROUTE
    with pytest.raises(PayloadError) as caught:
        parse_feed(_signal(route="someone-else"), ROUTE)
    assert caught.value.field == "route"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"source": None}, "source"),
        ({"name": ""}, "name"),
        ({"fired_at": "2026-11-29T07:00:00"}, "fired_at"),
        ({"status": "pending"}, "status"),
        ({"labels": {"n": 1}}, "labels.n"),
        ({"sevrity": "typo"}, "sevrity"),
    ],
)
def test_malformed_feed_signal_names_the_field(changes: dict[str, Any], field: str) -> None:
    """Missing, empty, naive-time, wrong-type and unknown fields are named."""
    with pytest.raises(PayloadError) as caught:
        parse_feed(_signal(**changes), ROUTE)
    assert caught.value.field == field
    assert field in str(caught.value)
