"""The HTTP layer with a recording publish double: auth, status codes, bodies, dedupe."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import structlog.testing
from pydantic import SecretStr
from sreforge_bus import MessageTooLarge, PublishError
from sreforge_contracts import Event, TriggerFired
from sreforge_trigger import TriggerSettings, create_app
from sreforge_trigger._body import DRAIN_BYTES

from .conftest import ROUTE, TOKEN, MakeAlert, MakePayload, RecordingPublish, encode

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _settings(**changes: object) -> TriggerSettings:
    return TriggerSettings.model_validate({"token": TOKEN, **changes})


@pytest.fixture
async def client(recording: RecordingPublish) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to the app in-process; publish records events."""
    app = create_app(recording, _settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://trigger") as client:
        yield client


async def test_webhook_is_accepted_after_publishing_each_alert(
    client: httpx.AsyncClient,
    recording: RecordingPublish,
    make_payload: MakePayload,
    make_alert: MakeAlert,
) -> None:
    """200 lists the event ids, and every one was handed to publish."""
    body = make_payload(make_alert(fingerprint="a" * 16), make_alert(fingerprint="b" * 16))
    response = await client.post(f"/v1/alertmanager/{ROUTE}", content=encode(body), headers=AUTH)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "accepted"
    assert answer["events"] == [e.event_id for e in recording.events]
    assert len(recording.events) == 2
    assert all(isinstance(e, TriggerFired) for e in recording.events)


async def test_redelivered_webhook_is_not_republished(
    client: httpx.AsyncClient, recording: RecordingPublish, make_payload: MakePayload
) -> None:
    """The in-process memory answers a re-send with 200 and no second publish."""
    for _ in range(3):
        response = await client.post(
            f"/v1/alertmanager/{ROUTE}", content=encode(make_payload()), headers=AUTH
        )
        assert response.status_code == 200
    assert len(recording.events) == 1
    assert response.json()["duplicates"] == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
)
async def test_missing_or_wrong_token_is_401_and_publishes_nothing(
    client: httpx.AsyncClient,
    recording: RecordingPublish,
    make_payload: MakePayload,
    headers: dict[str, str],
) -> None:
    """No valid bearer token: 401 with a Bearer challenge, nothing published, token not echoed."""
    for path in (f"/v1/alertmanager/{ROUTE}", f"/v1/feed/{ROUTE}"):
        response = await client.post(path, content=encode(make_payload()), headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in response.text
    assert recording.events == []


async def test_token_never_reaches_the_logs(
    client: httpx.AsyncClient, make_payload: MakePayload
) -> None:
    """Neither a wrong nor the right token appears in any log entry."""
    with structlog.testing.capture_logs() as logs:
        for headers in (AUTH, {"Authorization": "Bearer wrong-token"}):
            await client.post(
                f"/v1/alertmanager/{ROUTE}", content=encode(make_payload()), headers=headers
            )
    assert logs, "the accepted webhook should have been logged"
    assert TOKEN not in repr(logs)
    assert "wrong-token" not in repr(logs)


async def test_auth_is_checked_before_the_body(client: httpx.AsyncClient) -> None:
    """A malformed body with a wrong token is 401, not 400: nothing is parsed for strangers."""
    response = await client.post(f"/v1/alertmanager/{ROUTE}", content=b"{", headers={})
    assert response.status_code == 401


async def test_malformed_json_is_400(client: httpx.AsyncClient) -> None:
    """Bad JSON: 400 saying so."""
    response = await client.post(f"/v1/alertmanager/{ROUTE}", content=b"{oops", headers=AUTH)
    assert response.status_code == 400
    assert "malformed JSON" in response.json()["error"]


async def test_wrong_types_are_422_naming_the_field(
    client: httpx.AsyncClient, recording: RecordingPublish, make_payload: MakePayload
) -> None:
    """A wrong type deep in an alert is a 422 whose body names the field; nothing published."""
    body = make_payload()
    body["alerts"][0]["startsAt"] = 12
    response = await client.post(f"/v1/alertmanager/{ROUTE}", content=encode(body), headers=AUTH)
    assert response.status_code == 422
    assert response.json()["field"] == "alerts.0.startsAt"
    assert "alerts.0.startsAt" in response.json()["error"]
    assert recording.events == []


async def test_route_must_be_a_plain_token(client: httpx.AsyncClient) -> None:
    """A route with characters outside [A-Za-z0-9_-] is refused (422)."""
    response = await client.post("/v1/alertmanager/bad.route!", content=b"{}", headers=AUTH)
    assert response.status_code == 422


async def test_publish_failure_is_503(
    client: httpx.AsyncClient, recording: RecordingPublish, make_payload: MakePayload
) -> None:
    """The bus refusing the publish gives 503 so Alertmanager retries; a retry then succeeds."""
    recording.error = PublishError("no responders")
    path = f"/v1/alertmanager/{ROUTE}"
    response = await client.post(path, content=encode(make_payload()), headers=AUTH)
    assert response.status_code == 503
    assert "not acknowledged" in response.json()["error"]
    recording.error = None
    response = await client.post(path, content=encode(make_payload()), headers=AUTH)
    assert response.status_code == 200
    assert len(recording.events) == 1


async def test_publish_that_never_acks_is_503_within_the_timeout(
    make_payload: MakePayload,
) -> None:
    """A publish hanging past `publish_timeout` gives 503 instead of holding Alertmanager."""

    async def hang(event: Event) -> None:
        await asyncio.Event().wait()

    app = create_app(hang, _settings(publish_timeout=0.2))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://trigger") as client:
        response = await client.post(
            f"/v1/alertmanager/{ROUTE}", content=encode(make_payload()), headers=AUTH
        )
    assert response.status_code == 503
    assert "within 0.2s" in response.json()["error"]


async def test_feed_endpoint_publishes_the_signal(
    client: httpx.AsyncClient, recording: RecordingPublish
) -> None:
    """A feed signal becomes one event with the feed's source; a bad one is 422 naming it."""
    signal = {"source": "statuspage", "name": "Degraded", "fired_at": "2026-11-29T07:00:00Z"}
    response = await client.post(f"/v1/feed/{ROUTE}", json=signal, headers=AUTH)
    assert response.status_code == 200, response.text
    [event] = recording.events
    assert isinstance(event, TriggerFired)
    assert event.trigger.source == "statuspage"
    response = await client.post(
        f"/v1/feed/{ROUTE}", json={**signal, "fired_at": "soon"}, headers=AUTH
    )
    assert response.status_code == 422
    assert response.json()["field"] == "fired_at"


async def test_healthz_needs_no_token(client: httpx.AsyncClient) -> None:
    """`GET /healthz` answers 200 without auth."""
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_token_is_never_in_settings_repr_or_dump(tmp_path: object) -> None:
    """The token is a SecretStr: not in repr, str or a JSON dump of the settings."""
    settings = _settings()
    assert isinstance(settings.token, SecretStr)
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert TOKEN not in text


async def test_a_10_mb_webhook_is_413_naming_the_limit_and_the_app_serves_on(
    client: httpx.AsyncClient, recording: RecordingPublish, make_payload: MakePayload
) -> None:
    """A valid token does not buy an unbounded body: 413 before parsing, nothing published,
    and the next webhook is accepted."""
    huge = b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}'
    response = await client.post(f"/v1/alertmanager/{ROUTE}", content=huge, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 1024 * 1024
    assert "SREFORGE_TRIGGER_MAX_BODY_BYTES" in response.json()["error"]
    assert recording.events == []
    again = await client.post(
        f"/v1/alertmanager/{ROUTE}", content=encode(make_payload()), headers=AUTH
    )
    assert again.status_code == 200, again.text


@pytest.mark.parametrize("path", [f"/v1/alertmanager/{ROUTE}", f"/v1/feed/{ROUTE}"])
async def test_a_chunked_body_without_a_length_is_cut_off_at_the_cap(
    recording: RecordingPublish, path: str
) -> None:
    """No Content-Length to refuse on: the body is read in chunks and refused at the cap;
    an endless stream is drained only up to DRAIN_BYTES, then left."""
    app = create_app(recording, _settings(max_body_bytes=64 * 1024))
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:
            sent.append(1)
            yield b"x" * 16 * 1024

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://trigger") as client:
        response = await client.post(path, content=endless(), headers=AUTH)
    assert response.status_code == 413
    assert "over the limit of 65536 bytes" in response.json()["error"]
    assert len(sent) * 16 * 1024 <= DRAIN_BYTES + 32 * 1024, "the app read an endless body"
    assert recording.events == []


async def test_an_event_too_large_for_the_bus_is_422_not_a_retry_loop(
    client: httpx.AsyncClient, recording: RecordingPublish, make_payload: MakePayload
) -> None:
    """A body under the HTTP cap whose event is over the bus limit would 503 forever (and
    Alertmanager retry forever): it is the sender's error, named as such."""
    recording.error = MessageTooLarge("publish to 'sreforge.trigger.fired': over the limit")
    path = f"/v1/alertmanager/{ROUTE}"
    response = await client.post(path, content=encode(make_payload()), headers=AUTH)
    assert response.status_code == 422
    assert "too large for the bus" in response.json()["error"]
