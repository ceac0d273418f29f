"""The recorder's live dashboard in a real headless Chromium, the recorder service on a
real nats-server fed by published events: the event stream and the whole-bus stream
advance on the page, the SLI chart grows as the oracle's samples are saved, and the run
reaches its verdict and its report there; the judge writes why it did not judge."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest
from devtools import DevTools
from headless import chromium
from pydantic import SecretStr
from sreforge_bus import Bus, bootstrap, connect, oracle_samples_key
from sreforge_bus.embedded import NatsServer
from sreforge_contracts import Event
from sreforge_recorder import CONSUMER, RecorderSettings, recorder_service

__all__ = ["chromium"]

TOKEN = "operator-token-for-the-test"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


class Engine:
    """The recorder service and a publisher on their own event loop, in a thread."""

    def __init__(self, url: str, settings: RecorderSettings) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.bus: Bus = self.call(self._connect(url))
        self._stop = self.call(self._event())
        self._serving: Future[None] = asyncio.run_coroutine_threadsafe(
            recorder_service(settings).run(self.bus, self._stop), self.loop
        )

    def call(self, coroutine: Any) -> Any:
        """Run `coroutine` on the engine's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _connect(self, url: str) -> Bus:
        bus = await connect(url, name="pytest-dashboard")
        await bootstrap(bus, [CONSUMER])
        return bus

    async def _event(self) -> asyncio.Event:
        return asyncio.Event()

    def publish(self, events: list[Event]) -> None:
        """Publish `events` in order (as their services would)."""
        for event in events:
            self.call(self.bus.publish(event))

    def save_samples(self, run_id: str, n: int, samples: list[dict[str, Any]]) -> None:
        """Save chunk `n` of the run's grading samples, as the oracle does while grading."""
        self.call(self.bus.runs.claim(oracle_samples_key(run_id, n), json.dumps(samples).encode()))

    def close(self) -> None:
        """Stop the recorder, close the bus and the loop."""
        self.loop.call_soon_threadsafe(self._stop.set)
        self._serving.result(timeout=30)
        self.call(self.bus.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def recorder(
    nats_server: NatsServer, settings: RecorderSettings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Engine, str]]:
    """The recorder serving its dashboard on a loopback port; its base URL."""
    monkeypatch.delenv("SREFORGE_JUDGE_MODEL", raising=False)
    port = _free_port()
    update = {"dashboard_port": port, "dashboard_token": SecretStr(TOKEN), "bank": False}
    served = settings.model_copy(update=update)
    engine = Engine(nats_server.url, served)
    base = f"http://127.0.0.1:{port}"
    try:
        _until_up(base)
        yield engine, base
    finally:
        engine.close()


def _until_up(base: str) -> None:
    with httpx.Client(timeout=2) as client:
        for _ in range(200):
            try:
                client.get(base + "/")
                return
            except httpx.TransportError:
                threading.Event().wait(0.05)
    raise AssertionError(f"the dashboard at {base} never answered")


def _samples(first: int, count: int, sli: float) -> list[dict[str, Any]]:
    return [{"offset_seconds": float(i), "at": f"2026-11-29T08:03:{i:02d}Z", "sli": sli,
             "target_state": "firing" if i < 3 else "inactive"}
            for i in range(first, first + count)]  # fmt: skip


def _phase(run_id: str) -> str:
    return f"document.querySelector('tr[data-run=\"{run_id}\"] td:nth-child(3)')?.textContent"


def _number(element: str) -> str:
    return f"Number(document.getElementById('{element}').textContent)"


def test_the_recorders_dashboard_wants_the_token_and_keeps_it_out_of_pages(
    recorder: tuple[Engine, str],
) -> None:
    """No page or stream without the operator's token, and the page never carries it."""
    _, base = recorder
    assert httpx.get(base + "/").status_code == 401
    assert httpx.get(base + "/bus?token=wrong").status_code == 401
    page = httpx.get(base + "/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.is_success
    assert TOKEN not in page.text


def test_the_recorder_writes_the_url_its_dashboard_took_and_removes_it_when_it_stops(
    nats_server: NatsServer, settings: RecorderSettings, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """On any free port (as when 8787 is taken) the URL file names the port the dashboard
    took, without the token, and is gone once the recorder stops."""
    monkeypatch.delenv("SREFORGE_JUDGE_MODEL", raising=False)
    url_file = tmp_path / "home" / "dashboard.url"
    update = {"dashboard_port": 0, "dashboard_token": SecretStr(TOKEN), "bank": False,
              "dashboard_url_file": url_file}  # fmt: skip
    engine = Engine(nats_server.url, settings.model_copy(update=update))
    try:
        deadline = time.monotonic() + 30
        while not url_file.is_file():
            assert time.monotonic() < deadline, "the dashboard never wrote its URL"
            threading.Event().wait(0.05)
        url = url_file.read_text().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert int(url.rsplit(":", 1)[1].strip("/")) != 0
        assert httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).is_success
    finally:
        engine.close()
    assert not url_file.exists()


def test_a_run_in_flight_on_the_recorders_dashboard(
    chromium: str, recorder: tuple[Engine, str], story: Any, tmp_path: Path,
    settings: RecorderSettings,
) -> None:  # fmt: skip
    """Published events reach the page (run row, event stream, whole bus); the SLI chart
    grows with each saved chunk; the recorder's record brings the verdict and report."""
    engine, base = recorder
    events = story.happy()
    run = story.run_id
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        browser.open(f"{base}/?token={TOKEN}")
        browser.wait_for("document.getElementById('status').textContent === 'live'", "live")
        engine.publish(events[:5])  # requested .. the agent has its page
        browser.wait_for(_phase(run) + " === 'agent working'", "the hand-off")
        browser.wait_for(_number("bus-count") + " >= 5", "the whole bus")
        engine.publish(events[5:8])  # submitted, CI, deployed: grading starts
        browser.wait_for(_phase(run) + " === 'grading'", "the deploy")
        browser.wait_for(f"document.getElementById('sli-run').textContent === '{run}'", "sli")
        engine.save_samples(run, 0, _samples(0, 4, 0.9))
        browser.wait_for(_number("sli-count") + " === 4", "the first samples")
        engine.save_samples(run, 1, _samples(4, 3, 0.2))
        browser.wait_for(_number("sli-count") + " === 7", "the next samples, live")
        points = browser.evaluate("document.querySelector('polyline.sli-line').points.length")
        assert points == 7
        engine.publish(events[8:])  # scored: the recorder writes the record
        browser.wait_for("!!document.querySelector('a.report-link')", "the record")
        verdict = browser.evaluate("document.querySelector('tr td span.verdict').textContent")
        assert verdict == "passed"
        bus_text = browser.evaluate("document.getElementById('bus').textContent")
        assert "Scored" in bus_text
        assert "Recorded" in bus_text  # the recorder's own announcement, seen on the bus
        assert browser.problems == []
        href = browser.evaluate("document.querySelector('a.report-link').href")
        assert "<svg" in httpx.get(href).text
        shot = tmp_path / "dashboard.png"
        browser.screenshot(shot)
    finally:
        browser.close()
    target = os.environ.get("SREFORGE_REPORT_SCREENSHOTS")
    if target:  # docs/img/dashboard.png
        shutil.copy(shot, Path(target) / shot.name)
    skipped = json.loads((settings.runs_dir / run / "diagnosis-skipped.json").read_text())
    assert "no judge model configured" in skipped["reason"]
    record = json.loads((settings.runs_dir / run / "record.json").read_text())
    assert "diagnosis" not in record
