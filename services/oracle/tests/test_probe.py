"""The Prometheus probe against a real Prometheus (100 ms scrape/eval) and real exporters."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol, TypeVar

import pytest
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    ObservedAlert,
    ProbeError,
    PrometheusProbe,
    run_grading,
)

pytestmark = pytest.mark.integration

P99 = "api:request_latency_p99_seconds"
T = TypeVar("T")


class Exporter(Protocol):
    """A load generator's metrics endpoint (see conftest)."""

    url: str

    def stop(self) -> None: ...


class Prometheus(Protocol):
    """The running Prometheus of conftest and the exporter it scrapes as job `doomed`."""

    url: str
    doomed: Exporter


async def poll(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str) -> T:
    """Read until `ok` holds, or fail after 15 s naming what never happened and the last value."""
    deadline = time.monotonic() + 15
    value = await read()
    while not ok(value):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within 15 s; last read: {value!r}")
        await asyncio.sleep(0.05)
        value = await read()
    return value


def probe(prometheus: Prometheus, alert: str = "TargetFiring", **kw: object) -> PrometheusProbe:
    options: dict[str, object] = {
        "alert_name": alert,
        "sli_promql": P99,
        "load_target_promql": 'sum(loadgen_target_rps{job="loadgen"})',
        "load_achieved_promql": 'sum(loadgen_achieved_rps{job="loadgen"})',
    }
    return PrometheusProbe(prometheus.url, **(options | kw))  # type: ignore[arg-type]


async def test_alerts_report_firing_pending_and_labels(prometheus: Prometheus) -> None:
    """Firing and pending are told apart, and each alert keeps its service and role labels."""
    async with probe(prometheus) as reader:
        alerts = await poll(
            reader.alerts,
            lambda found: {a.name for a in found} >= {"TargetFiring", "StaysPending", "Ambient"},
            "the three test alerts active",
        )
    by_name = {a.name: a for a in alerts}
    assert by_name["TargetFiring"].state == "firing"
    assert by_name["StaysPending"].state == "pending"
    assert by_name["TargetFiring"].service == "api"
    assert by_name["Ambient"].ambient
    assert not by_name["TargetFiring"].ambient


@pytest.mark.parametrize(
    ("alert", "state"),
    [("TargetFiring", "firing"), ("StaysPending", "pending"), ("NoSuchAlert", "inactive")],
)
async def test_sample_reports_the_target_state(
    prometheus: Prometheus, alert: str, state: str
) -> None:
    """The sample's target state is the named alert's: firing, pending (for: 1h) or inactive."""
    async with probe(prometheus, alert) as reader:
        sample = await poll(
            lambda: reader.sample(at=datetime.now(UTC), offset_seconds=1.5),
            lambda s: (
                s.target_state == state and s.sli is not None and s.load_target_rps is not None
            ),
            f"{alert} reading {state} with SLI and load",
        )
    assert sample.offset_seconds == 1.5
    assert sample.sli == pytest.approx(0.123)
    assert (sample.load_target_rps, sample.load_achieved_rps) == (20.0, 19.5)
    assert "TargetFiring" in sample.to_sli_sample().firing_alerts


async def test_an_sli_without_a_value_reads_none_not_zero(prometheus: Prometheus) -> None:
    """NaN (no traffic) and an absent series are `None`: a missing SLI is never a perfect SLI."""
    async with probe(prometheus) as reader:
        await poll(lambda: reader.query(P99), lambda v: v is not None, "the SLI recording rule")
        assert await reader.query("api:idle_latency_p99_seconds") is None
        assert await reader.query("no_such_metric_anywhere") is None
        assert await reader.query("scalar(vector(2.5))") == 2.5


async def test_load_reads_none_once_the_generator_dies(prometheus: Prometheus) -> None:
    """A dead load generator's series go stale: the probe reports no load data, not a rate."""
    async with probe(
        prometheus,
        load_target_promql='sum(loadgen_target_rps{job="doomed"})',
        load_achieved_promql='sum(loadgen_achieved_rps{job="doomed"})',
    ) as reader:
        await poll(reader.load, lambda rates: rates == (10.0, 10.0), "doomed exporter scraped")
        prometheus.doomed.stop()
        await poll(reader.load, lambda rates: rates == (None, None), "stale load series")


async def test_load_from_the_generators_own_metrics_url(
    load_exporter: Callable[[float, float], Exporter], silent_url: str
) -> None:
    """Scraping the generator directly reads its rates, and a silent generator reads as none."""
    exporter = load_exporter(30.0, 12.0)
    async with PrometheusProbe(
        silent_url, alert_name="X", sli_promql=P99, loadgen_metrics_url=exporter.url
    ) as reader:
        assert await reader.load() == (30.0, 12.0)
        exporter.stop()
        assert await reader.load() == (None, None)


async def test_unreachable_prometheus_raises_probe_error(silent_url: str) -> None:
    """Prometheus down is an explicit error naming the endpoint, never an empty reading."""
    async with PrometheusProbe(silent_url, alert_name="X", sli_promql=P99) as reader:
        with pytest.raises(ProbeError, match=f"{silent_url}/api/v1/alerts: Prometheus unreachable"):
            await reader.sample(at=datetime.now(UTC), offset_seconds=0.0)


async def test_bad_promql_raises_with_prometheus_own_message(prometheus: Prometheus) -> None:
    """A query Prometheus refuses surfaces its error and the query at fault."""
    async with probe(prometheus, sli_promql="rate(") as reader:
        with pytest.raises(ProbeError, match=r"query=rate\(: HTTP 400, Prometheus said: .*parse"):
            await reader.sample(at=datetime.now(UTC), offset_seconds=0.0)


@pytest.fixture
def not_prometheus() -> Iterator[str]:
    """Some other web server (an HTML page) where Prometheus was expected."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>reading list</html>")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_a_body_that_is_not_json_raises_probe_error(not_prometheus: str) -> None:
    """A non-JSON answer is an error naming the endpoint and quoting the body."""
    async with PrometheusProbe(not_prometheus, alert_name="X", sli_promql=P99) as reader:
        with pytest.raises(ProbeError, match="body is not JSON: '<html>reading list"):
            await reader.alerts()


@pytest.mark.parametrize(
    ("alert", "handoff", "verdict", "score"),
    [("NoSuchAlert", ["TargetFiring"], "passed", 1.0), ("TargetFiring", [], "failed", 0.35)],
    ids=["clear-and-quiet", "never-clears"],
)
async def test_grading_end_to_end_against_prometheus(
    prometheus: Prometheus, alert: str, handoff: list[str], verdict: str, score: float
) -> None:
    """The loop, the probe and the algorithm together on a real Prometheus, scaled down.

    Ambient and pending alerts must not count as new, and the target alert,
    still firing, must keep the run from passing.
    """
    config = GradingConfig(
        alert_to_clear=alert,
        max_clear_time_seconds=0.6,
        sustained_clear_seconds=0.6,
        probe_interval_seconds=0.1,
        max_sample_gap_seconds=2.0,
        scope=frozenset({"api"}),
    )
    shipped = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
    async with probe(prometheus, alert) as reader:
        await poll(reader.alerts, lambda a: len(a) >= 3, "test alerts active")
        at_handoff = [a for a in await reader.alerts() if a.name in handoff]
        result = await run_grading(
            reader, config, shipped, at_handoff, started_at=datetime.now(UTC)
        )
    assert result.verdict == verdict, result.score
    assert result.score.score == pytest.approx(score, abs=0.01)
    assert len(result.sli_series) >= 5
    assert all(s.load_target_rps == 20.0 for s in result.sli_series)


def test_handoff_alerts_match_across_instances() -> None:
    """Hand-off identity is name + service: a redeploy's new instance label is the same alert."""
    before = ObservedAlert(name="A", state="firing", labels={"service": "api", "instance": ":1"})
    after = ObservedAlert(name="A", state="firing", labels={"service": "api", "instance": ":2"})
    assert before.key == after.key


async def test_a_late_sample_reads_prometheus_as_of_its_time(prometheus: Prometheus) -> None:
    """A sample stamped `at` but taken later (a loaded machine) reads every query as of `at`,
    as the history samples filling the gap before it do: `time()` tells when it was evaluated."""
    at = datetime.fromtimestamp(round(time.time()) - 3, UTC)
    async with probe(
        prometheus, app_requests_promql="time()", load_requests_promql="time()"
    ) as reader:
        assert await reader.query("time()", at=at) == at.timestamp()
        now = await reader.query("time()")
        assert now is not None
        assert now > at.timestamp() + 2, "without `at`: Prometheus's now"
        sample = await reader.sample(at=at, offset_seconds=0.0)
    assert sample.app_requests == at.timestamp()
    assert sample.load_requests == at.timestamp()


class _SlowGenerator:
    """A generator's /metrics that holds the first `hold` requests unanswered (its port open)."""

    def __init__(self, hold: int) -> None:
        self.held = threading.Event()  # set at teardown: the held requests may end
        seen: list[int] = []
        release = self.held

        class Metrics(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(1)
                if len(seen) <= hold:
                    release.wait(30)
                    return
                body = b"loadgen_target_rps 20\nloadgen_achieved_rps 19\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.requests = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"

    def close(self) -> None:
        self.held.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(("hold", "unobserved", "rates"), [
    (1, False, (20.0, 19.0)), (5, True, (None, None))], ids=["slow-once", "silent"],
)  # fmt: skip
async def test_a_generator_slow_to_answer_is_retried_then_unobserved_not_dead(
    prometheus: Prometheus, hold: int, unobserved: bool, rates: tuple[object, object]
) -> None:
    """One scrape past the timeout is retried within the sample; a generator whose port is
    open but which answers neither try reads as unobserved, not as a load that died."""
    generator = _SlowGenerator(hold)
    try:
        async with probe(prometheus, loadgen_metrics_url=generator.url, timeout_seconds=0.5) as p:
            sample = await p.sample(at=datetime.now(UTC), offset_seconds=1.0)
    finally:
        generator.close()
    assert (sample.load_target_rps, sample.load_achieved_rps) == rates
    assert sample.load_unobserved is unobserved
    assert len(generator.requests) == 2


async def test_a_generator_whose_port_refuses_reads_as_died(
    prometheus: Prometheus, silent_url: str
) -> None:
    """Nothing listening (the generator killed) is evidence: no load data, observed."""
    async with probe(prometheus, loadgen_metrics_url=f"{silent_url}/metrics") as reader:
        sample = await reader.sample(at=datetime.now(UTC), offset_seconds=1.0)
    assert (sample.load_target_rps, sample.load_achieved_rps) == (None, None)
    assert sample.load_unobserved is False
