"""The receiver against a real nats-server: events stored once, outages answered with 503."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from sreforge_bus import STREAM, Bus
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import poll, read_stream
from sreforge_contracts import TRIGGER_FIRED_SUBJECT, TriggerFired, parse_event
from sreforge_trigger import (
    TokenError,
    TriggerError,
    TriggerService,
    TriggerSettings,
    create_app,
    parse_webhook,
    webhook_events,
)

from .conftest import ROUTE, TOKEN, Json, MakeAlert, MakePayload, encode

pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PATH = f"/v1/alertmanager/{ROUTE}"


def _client(bus: Bus, **settings: object) -> httpx.AsyncClient:
    """A client for a fresh app (fresh dedupe memory) publishing to `bus`."""
    app = create_app(bus.publish, TriggerSettings.model_validate({"token": TOKEN, **settings}))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://trigger")


@pytest.fixture
async def client(bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client for the app, publishing through the real bus."""
    async with _client(bus, publish_timeout=1.0) as client:
        yield client


async def _trigger_counts(bus: Bus) -> dict[str, int]:
    info = await bus.js.stream_info(STREAM, subjects_filter="sreforge.trigger.>")
    return dict(info.state.subjects or {})


async def test_webhook_alert_is_stored_as_trigger_fired(
    bus: Bus, client: httpx.AsyncClient, make_payload: MakePayload
) -> None:
    """The 200 comes after the event is in the stream, with Nats-Msg-Id = event id."""
    response = await client.post(PATH, content=encode(make_payload()), headers=AUTH)
    assert response.status_code == 200, response.text
    [stored] = await read_stream(bus, TRIGGER_FIRED_SUBJECT, 1)
    event = parse_event(stored.data)
    assert isinstance(event, TriggerFired)
    assert event.trigger.alert_name == "HighLatency"
    assert [event.event_id] == response.json()["events"]
    assert stored.headers["Nats-Msg-Id"] == event.event_id


async def test_duplicate_and_reordered_deliveries_store_one_event_per_occurrence(
    bus: Bus, make_payload: MakePayload, make_alert: MakeAlert
) -> None:
    """Re-sends, concurrent duplicates and resolved-before-fired, across fresh receivers.

    The stream ends with exactly the occurrences' events, each once, whatever the order.
    """
    a_fired = make_alert(fingerprint="a" * 16)
    b_fired = make_alert(fingerprint="b" * 16, instance="b")
    a_resolved = make_alert(fingerprint="a" * 16, status="resolved")
    deliveries: list[Json] = [
        make_payload(a_fired, b_fired),
        make_payload(a_resolved, b_fired),
        make_payload(a_fired),
    ]
    expected = {
        event.event_id
        for body in deliveries
        for event in webhook_events(parse_webhook(encode(body)), ROUTE)
    }
    assert len(expected) == 3
    shuffled = deliveries * 3
    random.Random(4).shuffle(shuffled)
    for receiver in range(2):  # a second receiver has no memory: JetStream dedupes
        async with _client(bus) as client:
            answers = await asyncio.gather(
                *(client.post(PATH, content=encode(body), headers=AUTH) for body in shuffled)
            )
            assert [a.status_code for a in answers] == [200] * len(shuffled), receiver
    assert await _trigger_counts(bus) == {
        "sreforge.trigger.fired": 2,
        "sreforge.trigger.resolved": 1,
    }
    stored = await read_stream(bus, "sreforge.trigger.>", 3)
    assert {message.headers["Nats-Msg-Id"] for message in stored} == expected


async def test_wrong_token_is_401_and_stores_nothing(
    bus: Bus, client: httpx.AsyncClient, make_payload: MakePayload
) -> None:
    """A wrong bearer token leaves the stream untouched."""
    headers = {"Authorization": "Bearer not-the-token"}
    response = await client.post(PATH, content=encode(make_payload()), headers=headers)
    assert response.status_code == 401
    assert await _trigger_counts(bus) == {}


async def test_bus_outage_is_503_and_the_retry_after_recovery_is_stored(
    bus: Bus, nats_server: NatsServer, client: httpx.AsyncClient, make_payload: MakePayload
) -> None:
    """With nats-server down the webhook gets 503; Alertmanager's retry succeeds once it is up."""
    body = encode(make_payload())
    nats_server.stop()
    response = await client.post(PATH, content=body, headers=AUTH)
    assert response.status_code == 503
    nats_server.start()

    async def accepted() -> bool:
        return (await client.post(PATH, content=body, headers=AUTH)).status_code == 200

    await poll(accepted, "a 200 once nats-server is back", timeout=30.0)
    assert await _trigger_counts(bus) == {"sreforge.trigger.fired": 1}


async def test_closed_bus_is_503(
    bus: Bus, client: httpx.AsyncClient, make_payload: MakePayload
) -> None:
    """A closed connection fails the publish at once: 503, not a hang or a 500."""
    await bus.close()
    response = await client.post(PATH, content=encode(make_payload()), headers=AUTH)
    assert response.status_code == 503


async def test_service_serves_http_until_stopped(bus: Bus, make_payload: MakePayload) -> None:
    """`TriggerService.run` listens on loopback, stores webhooks, and shuts down on `stop`."""
    service = TriggerService(settings=TriggerSettings.model_validate({"token": TOKEN, "port": 0}))
    stop = asyncio.Event()
    waiting = asyncio.create_task(service.listening.wait())  # waiting before run starts works
    task = asyncio.create_task(service.run(bus, stop))
    url = await asyncio.wait_for(waiting, 10)
    assert url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/healthz")).status_code == 200
        response = await client.post(PATH, content=encode(make_payload()), headers=AUTH)
        assert response.status_code == 200, response.text
    await read_stream(bus, TRIGGER_FIRED_SUBJECT, 1)
    stop.set()
    await asyncio.wait_for(task, 10)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(base_url=url) as client:
            await client.get("/healthz")


async def test_service_fails_loudly_on_a_busy_port_or_no_token(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A taken port is a TriggerError naming host:port; no token is a TokenError at start."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = TriggerSettings.model_validate({"token": TOKEN, "port": port})
        with pytest.raises(TriggerError, match=f"127.0.0.1:{port}"):
            await TriggerService(settings=busy).run(bus, asyncio.Event())
    monkeypatch.delenv("SREFORGE_TRIGGER_TOKEN", raising=False)
    monkeypatch.delenv("SREFORGE_TRIGGER_TOKEN_FILE", raising=False)
    with pytest.raises(TokenError):
        await TriggerService(settings=TriggerSettings(port=0)).run(bus, asyncio.Event())


@pytest.mark.timeout(60)
async def test_a_10_mb_webhook_on_the_real_server_is_413_and_the_next_is_served(
    bus: Bus, make_payload: MakePayload
) -> None:
    """Over real HTTP (uvicorn): the oversize body is refused from its Content-Length, the
    sender reads the 413, and the service answers the next webhook as usual."""
    service = TriggerService(settings=TriggerSettings.model_validate({"token": TOKEN, "port": 0}))
    stop = asyncio.Event()
    waiting = asyncio.create_task(service.listening.wait())
    task = asyncio.create_task(service.run(bus, stop))
    url = await asyncio.wait_for(waiting, 10)
    try:
        huge = b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}'
        async with httpx.AsyncClient(base_url=url) as client:
            response = await client.post(PATH, content=huge, headers=AUTH)
            assert response.status_code == 413
            assert response.json()["limit_bytes"] == 1024 * 1024
        async with httpx.AsyncClient(base_url=url) as client:
            response = await client.post(PATH, content=encode(make_payload()), headers=AUTH)
            assert response.status_code == 200, response.text
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
