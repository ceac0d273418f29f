"""A real Alertmanager notifying the real receiver: its alerts reach the stream as events."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sreforge_bus import Bus
from sreforge_bus.testing import poll, read_stream
from sreforge_contracts import (
    TRIGGER_FIRED_SUBJECT,
    TRIGGER_RESOLVED_SUBJECT,
    TriggerFired,
    TriggerResolved,
    parse_event,
)
from sreforge_trigger import TriggerService, TriggerSettings, label_fingerprint

from .conftest import ROUTE, TOKEN

pytestmark = pytest.mark.integration

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
LABELS = {"alertname": "HighLatency", "severity": "critical", "service": "books"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def trigger_url(bus: Bus) -> AsyncIterator[str]:
    """The trigger service serving HTTP on a free loopback port, publishing to `bus`."""
    service = TriggerService(settings=TriggerSettings.model_validate({"token": TOKEN, "port": 0}))
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        yield await asyncio.wait_for(service.listening.wait(), 10)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
def alertmanager(trigger_url: str, tmp_path: Path) -> Iterator[str]:
    """A real Alertmanager whose one receiver is the trigger's webhook; yields its URL."""
    if ALERTMANAGER is None:
        pytest.fail(
            "prometheus-alertmanager is not installed (apt install prometheus-alertmanager)"
        )
    token_file = tmp_path / "webhook.token"
    token_file.write_text(TOKEN)
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route:\n  receiver: pager\n  group_by: [alertname]\n"
        "  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n"
        "receivers:\n  - name: pager\n    webhook_configs:\n"
        f"      - url: {trigger_url}/v1/alertmanager/{ROUTE}\n        send_resolved: true\n"
        "        http_config:\n          authorization:\n            type: Bearer\n"
        f"            credentials_file: {token_file}\n"
    )
    port = _free_port()
    log = (tmp_path / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.timeout(60)
async def test_alertmanager_firing_and_resolved_notifications_become_events(
    bus: Bus, alertmanager: str
) -> None:
    """Alertmanager's own webhook (version 4, bearer auth) yields TriggerFired then Resolved.

    Fingerprint and start time are Alertmanager's; the route rides in the labels.
    """
    started = datetime.now(UTC).replace(microsecond=0)
    async with httpx.AsyncClient(base_url=alertmanager) as client:

        async def ready() -> bool:
            try:
                return (await client.get("/-/ready")).status_code == 200
            except httpx.TransportError:
                return False

        await poll(ready, "alertmanager to become ready", timeout=20.0)
        alert = {"labels": LABELS, "startsAt": started.isoformat()}
        firing = {**alert, "endsAt": (started + timedelta(hours=1)).isoformat()}
        assert (await client.post("/api/v2/alerts", json=[firing])).status_code == 200
        [fired_msg] = await read_stream(bus, TRIGGER_FIRED_SUBJECT, 1, timeout=20.0)
        resolved = {**alert, "endsAt": datetime.now(UTC).isoformat()}
        assert (await client.post("/api/v2/alerts", json=[resolved])).status_code == 200
        [resolved_msg] = await read_stream(bus, TRIGGER_RESOLVED_SUBJECT, 1, timeout=20.0)
    fired, gone = parse_event(fired_msg.data), parse_event(resolved_msg.data)
    assert isinstance(fired, TriggerFired)
    assert isinstance(gone, TriggerResolved)
    for event in (fired, gone):
        assert event.trigger.source == "alertmanager"
        assert event.trigger.fingerprint == label_fingerprint(LABELS)
        assert event.trigger.fired_at == started
        assert event.trigger.labels == LABELS
        assert event.trigger.route == ROUTE
