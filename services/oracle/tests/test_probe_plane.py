"""The probe's outside-the-app reads against real servers.

One scrape of the load generator per sample (rates, ok ratio, latency histogram, p99),
the request counts on Prometheus, and the monitoring plane: a real Prometheus reloaded
(SIGHUP: the run's has no lifecycle API) and restarted, a real Alertmanager restarted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol, TypeVar

import pytest
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MonitoringSnapshot,
    PrometheusProbe,
    grade,
)

pytestmark = pytest.mark.integration

P99 = "api:request_latency_p99_seconds"
T = TypeVar("T")

LOADGEN_TEXT = """\
# HELP loadgen_target_rps Offered rate
loadgen_target_rps 20.0
loadgen_achieved_rps 19.0
loadgen_ok_ratio 0.97
loadgen_requests_total{status="200"} 480.0
loadgen_requests_total{status="timeout"} 20.0
# TYPE loadgen_client_latency_seconds histogram
loadgen_client_latency_seconds_bucket{le="0.1"} 300.0
loadgen_client_latency_seconds_bucket{le="0.25"} 450.0
loadgen_client_latency_seconds_bucket{le="0.3"} 470.0
loadgen_client_latency_seconds_bucket{le="0.5"} 480.0
loadgen_client_latency_seconds_bucket{le="1.0"} 480.0
loadgen_client_latency_seconds_bucket{le="2.5"} 480.0
loadgen_client_latency_seconds_bucket{le="5.0"} 480.0
loadgen_client_latency_seconds_bucket{le="10.0"} 500.0
loadgen_client_latency_seconds_bucket{le="+Inf"} 500.0
loadgen_client_latency_seconds_count 500.0
loadgen_client_latency_seconds_sum 81.5
loadgen_client_p99_seconds P99
"""


async def poll(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str) -> T:
    """Read until `ok` holds, or fail after 20 s naming what never happened and the last value."""
    deadline = time.monotonic() + 20
    value = await read()
    while not ok(value):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within 20 s; last read: {value!r}")
        await asyncio.sleep(0.1)
        value = await read()
    return value


@dataclass
class Loadgen:
    """A load generator's `/metrics` serving fixed text, counting the scrapes it answered."""

    url: str
    p99: str = "0.42"
    hits: int = 0


class Prometheus(Protocol):
    """The conftest Prometheus (a module's)."""

    url: str


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session, and wait for it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


@pytest.fixture
def loadgen() -> Iterator[Loadgen]:
    """A fake load generator exposition (the harness-owned one's shape) on a loopback port."""
    state = Loadgen(url="")

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits += 1
            body = LOADGEN_TEXT.replace("P99", state.p99).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_one_loadgen_scrape_gives_rates_answers_and_client_latency(
    prometheus: Prometheus, loadgen: Loadgen
) -> None:
    """A sample scrapes the generator once for everything, and reads both request counts."""
    async with PrometheusProbe(
        prometheus.url,
        alert_name="TargetFiring",
        sli_promql=P99,
        loadgen_metrics_url=loadgen.url,
        service_ok_promql="min(loadgen_ok_ratio)",
        client_objective_seconds=0.3,
        app_requests_promql='sum(loadgen_target_rps{job="loadgen"})',
        load_requests_promql="vector(500)",
    ) as reader:
        await poll(lambda: reader.query(P99), lambda v: v is not None, "the SLI recording rule")
        sample = await poll(
            lambda: reader.sample(at=datetime.now(UTC), offset_seconds=1.0),
            lambda s: s.app_requests is not None,
            "the loadgen job scraped",
        )
        hits = loadgen.hits
        await reader.sample(at=datetime.now(UTC), offset_seconds=2.0)
        assert loadgen.hits == hits + 1
    assert (sample.load_target_rps, sample.load_achieved_rps) == (20.0, 19.0)
    assert sample.service_ok_ratio == 0.97
    assert (sample.client_requests, sample.client_within_objective) == (500.0, 470.0)
    assert sample.client_p99_seconds == 0.42
    assert (sample.app_requests, sample.load_requests) == (20.0, 500.0)
    row = sample.to_sli_sample()
    assert (row.client_p99_seconds, row.client_requests, row.app_requests) == (0.42, 500.0, 20.0)


async def test_an_objective_off_the_buckets_and_a_nan_p99_read_as_none(
    loadgen: Loadgen, silent_url: str
) -> None:
    """No le=0.35 bucket: no reading (the gate then fails closed); a NaN p99 is no p99."""
    loadgen.p99 = "NaN"
    async with PrometheusProbe(
        silent_url,
        alert_name="X",
        sli_promql=P99,
        loadgen_metrics_url=loadgen.url,
        client_objective_seconds=0.35,
    ) as reader:
        reading = await reader._load_reading()
    assert reading.client_requests == 500.0
    assert reading.client_within_objective is None
    assert reading.client_p99_seconds is None


class Plane(Protocol):
    """A restartable Prometheus and Alertmanager of one test (see conftest)."""

    home: Path
    processes: dict[str, subprocess.Popen[bytes]]

    @property
    def prometheus(self) -> str: ...

    @property
    def alertmanager(self) -> str: ...

    def restart(self, name: str) -> None: ...

    def reload_prometheus(self) -> None: ...


def probe(plane: Plane) -> PrometheusProbe:
    return PrometheusProbe(
        plane.prometheus,
        alert_name="TargetFiring",
        sli_promql=P99,
        read_monitoring=True,
        alertmanager_url=plane.alertmanager,
    )


def monitoring_verdict(
    snapshots: list[MonitoringSnapshot | None], armed: datetime
) -> tuple[bool, str]:
    """`monitoring_intact` over these readings (`None`: a sample without one), a second apart."""
    config = GradingConfig(
        alert_to_clear="NeverFires",
        max_clear_time_seconds=10,
        sustained_clear_seconds=len(snapshots) - 1,
        probe_interval_seconds=1,
        monitoring_gated=True,
        fault_armed_at=armed,
    )
    samples = [
        GradingSample(
            at=armed + timedelta(seconds=i),
            offset_seconds=float(i),
            target_state="inactive",
            sli=0.1,
            load_achieved_rps=1.0,
            load_target_rps=1.0,
            monitoring=snapshot,
        )
        for i, snapshot in enumerate(snapshots)
    ]
    shipped = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
    [gate] = [
        s for s in grade(config, shipped, (), samples).score.signals if s.id.startswith("mon")
    ]
    return gate.satisfied, gate.detail


@pytest.mark.timeout(120)
async def test_a_prometheus_reload_with_new_rules_and_a_restart_are_seen(plane: Plane) -> None:
    """SIGHUP with changed rules moves the config time and the rules' fingerprint; a restart
    moves the start time. Each fails `monitoring_intact`; unchanged readings hold it."""
    async with probe(plane) as reader:
        first = await poll(reader.monitoring, lambda m: len(m.jobs) == 2, "both jobs listed")
        armed = datetime.now(UTC)
        again = await reader.monitoring()
        sample = await reader.sample(at=armed, offset_seconds=0.0)
        assert first == again == sample.monitoring
        assert first.jobs == ("doomed", "loadgen")
        assert first.prometheus_started_at < armed
        assert first.alertmanager_started_at is not None
        assert first.alertmanager_started_at < armed
        assert monitoring_verdict([first, again], armed)[0]

        rules = (plane.home / "rules.yml").read_text()
        (plane.home / "rules.yml").write_text(rules.replace("vector(1) < 0", "vector(1) < 1"))
        # Prometheus keeps its config time in whole seconds: reload in a later second than
        # the first load, or the two times read equal however real the reload.
        assert first.prometheus_config_loaded_at is not None
        later = first.prometheus_config_loaded_at.replace(microsecond=0) + timedelta(seconds=2)
        await asyncio.sleep(max(0.0, (later - datetime.now(UTC)).total_seconds()))
        plane.reload_prometheus()
        reloaded = await poll(reader.monitoring, lambda m: m.rules != first.rules, "new rules")
        assert reloaded.prometheus_config_loaded_at != first.prometheus_config_loaded_at
        assert reloaded.prometheus_started_at == first.prometheus_started_at
        held, detail = monitoring_verdict([first, reloaded], armed)
        assert not held
        assert "Prometheus reloaded its configuration" in detail

        plane.restart("prometheus")
        restarted = await reader.monitoring()
        assert restarted.prometheus_started_at > armed
        held, detail = monitoring_verdict([first, restarted], armed)
        assert not held
        assert "Prometheus restarted" in detail


@pytest.mark.timeout(120)
async def test_alertmanager_restarted_or_silent_is_seen(plane: Plane) -> None:
    """A restarted Alertmanager has a new start time; a stopped one reads as no answer."""
    async with probe(plane) as reader:
        first = await poll(reader.monitoring, lambda m: len(m.jobs) == 2, "both jobs listed")
        armed = datetime.now(UTC)
        plane.restart("alertmanager")
        restarted = await reader.monitoring()
        assert restarted.alertmanager_started_at != first.alertmanager_started_at
        assert restarted.alertmanager_config == first.alertmanager_config
        held, detail = monitoring_verdict([first, restarted], armed)
        assert not held
        assert "Alertmanager restarted" in detail

        stop(plane.processes["alertmanager"])
        silent = await reader.monitoring()
        assert (silent.alertmanager_started_at, silent.alertmanager_config) == (None, None)
        held, detail = monitoring_verdict([first, silent], armed)
        assert not held
        assert "Alertmanager did not answer at t=1.0s" in detail


@pytest.mark.timeout(120)
async def test_a_paced_probe_reads_the_plane_once_per_interval_and_misses_no_restart(
    plane: Plane,
) -> None:
    """Paced, samples between readings carry none; a Prometheus restarted between two
    readings still fails `monitoring_intact` at the next one, and unpaced every sample reads."""
    async with probe(plane) as reader:
        await poll(reader.monitoring, lambda m: len(m.jobs) == 2, "both jobs listed")
        armed = datetime.now(UTC)
        unpaced = [
            await reader.sample(at=armed + timedelta(seconds=i / 10), offset_seconds=0.0)
            for i in range(2)
        ]
        assert all(s.monitoring is not None for s in unpaced)

        reader.pace_monitoring(0.5)
        at = armed + timedelta(seconds=1)
        read = await reader.sample(at=at, offset_seconds=0.0)
        between = await reader.sample(at=at + timedelta(seconds=0.3), offset_seconds=0.3)
        assert read.monitoring is not None
        assert between.monitoring is None
        plane.restart("prometheus")
        await poll(reader.alerts, lambda _: True, "Prometheus answering again")
        after = await reader.sample(at=at + timedelta(seconds=0.6), offset_seconds=0.6)
        assert after.monitoring is not None
        assert after.monitoring.prometheus_started_at > armed
        held, detail = monitoring_verdict([read.monitoring, None, after.monitoring], armed)
        assert not held
        assert "Prometheus restarted" in detail
