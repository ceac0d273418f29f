"""The poller against a real Prometheus: a rule that fires, then is removed, gives both events."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
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

PROMETHEUS = shutil.which("prometheus")
RULE = """groups:
  - name: trigger-test
    interval: 1s
    rules:
      - alert: AlwaysFiring
        expr: vector(1)
        labels: {severity: page}
        annotations: {summary: always}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real Prometheus evaluating one always-firing rule; yields its URL and rule file."""
    if PROMETHEUS is None:
        pytest.fail("prometheus is not installed (apt install prometheus)")
    rules = tmp_path / "rules.yml"
    rules.write_text(RULE)
    config = tmp_path / "prometheus.yml"
    config.write_text(f"global:\n  evaluation_interval: 1s\nrule_files: [{rules}]\n")
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", rules
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.timeout(60)
async def test_poller_reports_a_firing_rule_and_its_removal(
    bus: Bus, prometheus: tuple[str, Path]
) -> None:
    """The service's poller (configured by settings) stores TriggerFired, then TriggerResolved
    once the rule is gone, with source `prometheus`, the route and Prometheus' fingerprint.
    """
    url, rules = prometheus
    settings = TriggerSettings.model_validate(
        {"token": TOKEN, "port": 0, "poll_url": url, "poll_interval": 0.2, "poll_route": ROUTE}
    )
    service = TriggerService(settings=settings)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        [fired_msg] = await read_stream(bus, TRIGGER_FIRED_SUBJECT, 1, timeout=30.0)
        rules.write_text("groups: []\n")
        async with httpx.AsyncClient(base_url=url) as client:

            async def reloaded() -> bool:
                return (await client.post("/-/reload")).status_code == 200

            await poll(reloaded, "prometheus to reload its rules")
        [resolved_msg] = await read_stream(bus, TRIGGER_RESOLVED_SUBJECT, 1, timeout=20.0)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    fired, gone = parse_event(fired_msg.data), parse_event(resolved_msg.data)
    assert isinstance(fired, TriggerFired)
    assert isinstance(gone, TriggerResolved)
    labels = {"alertname": "AlwaysFiring", "severity": "page"}
    for event in (fired, gone):
        assert event.trigger.source == "prometheus"
        assert event.trigger.alert_name == "AlwaysFiring"
        assert event.trigger.labels == labels
        assert event.trigger.route == ROUTE
        assert event.trigger.fingerprint == label_fingerprint(labels)
    assert gone.trigger.fired_at == fired.trigger.fired_at
