"""The live dashboard in a real headless Chromium while a run is in flight: the event
stream advances on the page as the recorder appends events, and the run reaches its
verdict and its report link there."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from devtools import DevTools
from headless import chromium
from reportfixtures import write_run
from sreforge_report._dashboard import create_dashboard

__all__ = ["chromium"]

RUN_ID = "20261129-080000-abc123"
TOKEN = "operator-token-for-the-test"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A runs/ folder the test plays the recorder in."""
    return tmp_path / "runs"


@pytest.fixture
def dashboard(runs: Path) -> Iterator[str]:
    """The dashboard app on a free loopback port, served by uvicorn in a thread."""
    runs.mkdir()
    config = uvicorn.Config(create_dashboard(runs, TOKEN), host="127.0.0.1", port=0,
                            log_level="warning", lifespan="off")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the dashboard did not start within 20s"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _split_run(runs: Path, scratch: Path) -> tuple[list[str], bytes]:
    """A whole run's event lines and record, to be appended by the test."""
    folder = write_run(scratch, RUN_ID)
    lines = (folder / "events.jsonl").read_text().splitlines(keepends=True)
    return lines, (folder / "record.json").read_bytes()


def _phase(run_id: str) -> str:
    return f"document.querySelector('tr[data-run=\"{run_id}\"] td:nth-child(3)')?.textContent"


def test_every_route_wants_the_operator_token(dashboard: str) -> None:
    """The dashboard shows run details: no page or stream without the token."""
    assert httpx.get(dashboard + "/").status_code == 401
    assert httpx.get(dashboard + "/?token=wrong").status_code == 401
    assert httpx.get(dashboard + "/", headers={"Authorization": f"Bearer {TOKEN}"}).is_success


def test_the_page_follows_a_run_in_flight_to_its_verdict(
    chromium: str, dashboard: str, runs: Path, tmp_path: Path
) -> None:
    """The stream advances on the page as events are appended; the verdict and report land."""
    lines, record = _split_run(runs, tmp_path / "scratch")
    folder = runs / RUN_ID
    folder.mkdir()
    log = folder / "events.jsonl"
    log.write_text("".join(lines[:4]))  # requested, armed, triggered, the agent has the page
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        browser.open(f"{dashboard}/?token={TOKEN}")
        assert browser.wait_for(_phase(RUN_ID) + " === 'agent working'", "the hand-off")
        assert browser.evaluate("document.getElementById('status').textContent") == "live"
        with log.open("a") as out:  # the recorder appends as events arrive
            out.write("".join(lines[4:7]))
        browser.wait_for(_phase(RUN_ID) + " === 'grading'", "the deploy")
        with log.open("a") as out:
            out.write("".join(lines[7:]))
        browser.wait_for(_phase(RUN_ID) + " === 'scored'", "the score")
        (folder / "record.json").write_bytes(record)
        browser.wait_for("!!document.querySelector('a.report-link')", "the report link")
        verdict = browser.evaluate("document.querySelector('tr td span.verdict').textContent")
        assert verdict == "passed"
        scenario = browser.evaluate("document.querySelector('tr td:nth-child(2)').textContent")
        assert scenario == "latency-cache-stampede / openai"
        events = int(browser.evaluate("document.getElementById('count').textContent"))
        assert events == len(lines) + 1  # every event, then the record
        shot = tmp_path / "dashboard.png"
        browser.screenshot(shot)
        assert browser.problems == []
        href = browser.evaluate("document.querySelector('a.report-link').href")
        assert httpx.get(href).text.count('<svg class="chart line-chart"') == 2
    finally:
        browser.close()
    target = os.environ.get("SREFORGE_REPORT_SCREENSHOTS")
    if target:  # the recorder's dashboard makes docs/img/dashboard.png; this one its own
        shutil.copy(shot, Path(target) / "dashboard-folders.png")


def test_a_runs_own_stream_carries_only_that_run(dashboard: str, runs: Path) -> None:
    """A run's page never shows another run's events."""
    for run_id in (RUN_ID, "20261129-090000-other1"):
        (runs / run_id).mkdir()
        event = {"type": "FaultArmed", "occurred_at": "2026-11-29T08:00:00Z"}
        (runs / run_id / "events.jsonl").write_text(json.dumps({"event": event}) + "\n")
    url = f"{dashboard}/runs/{RUN_ID}/events?token={TOKEN}"
    with httpx.stream("GET", url, timeout=10) as response:
        first = next(line for line in response.iter_lines() if line.startswith("data:"))
    assert json.loads(first.removeprefix("data: "))["run_id"] == RUN_ID
