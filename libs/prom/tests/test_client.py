"""The client against a real Prometheus: what each call answers, and how each failure reads."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import httpx
import pytest
from sreforge_prom import (
    Alert,
    AsyncPrometheusClient,
    PrometheusAnswerError,
    PrometheusClient,
    PrometheusError,
    PrometheusUnreachable,
    duration_seconds,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

_T = TypeVar("_T")


def _eventually(read: Callable[[], _T], ok: Callable[[_T], bool], what: str) -> _T:
    deadline = time.monotonic() + 20
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within 20 s; last: {value!r:.400}")
        time.sleep(0.05)


async def _first_alerts(client: AsyncPrometheusClient) -> list[Alert]:
    """Poll until any alert is active (the caller bounds the wait)."""
    while True:
        alerts = await client.alerts()
        if alerts:
            return alerts
        await asyncio.sleep(0.05)


def test_query_is_evaluated_as_of_the_time_given(prometheus: str) -> None:
    """`at` is the evaluation time: the oracle grades each sample as of its own time."""
    at = datetime.now(UTC) - timedelta(minutes=3)
    with PrometheusClient(prometheus, timeout_seconds=5) as client:
        [sample] = client.query("time()", at=at)
        assert sample.labels == {}
        assert sample.value == pytest.approx(at.timestamp(), abs=0.001)
        [now] = client.query("time()")
    assert now.value > at.timestamp() + 170


async def test_async_query_returns_a_vector_with_labels_and_keeps_nan(prometheus: str) -> None:
    """A vector's samples carry labels; NaN is a value here (its users decide what it means)."""
    async with AsyncPrometheusClient(prometheus, timeout_seconds=5) as client:
        [sample] = await client.query('label_replace(vector(2), "k", "v", "", "")')
        [nan] = await client.query("vector(0) / 0")
    assert (sample.labels, sample.value) == ({"k": "v"}, 2.0)
    assert nan.value != nan.value


def test_query_range_keys_values_by_unix_milliseconds(prometheus: str) -> None:
    """Every step is a point, keyed by its millisecond timestamp."""
    end_ms = int(time.time() * 1000) // 1000 * 1000
    with PrometheusClient(prometheus, timeout_seconds=5) as client:
        [series] = client.query_range(
            "vector(time())", start_ms=end_ms - 2_000, end_ms=end_ms, step_ms=500
        )
    assert sorted(series.values) == list(range(end_ms - 2_000, end_ms + 1, 500))
    assert series.values[end_ms] == pytest.approx(end_ms / 1000)


def test_targets_report_job_health_and_scrape_interval(prometheus: str) -> None:
    """The deployer waits on `health`; the oracle reads `scrape_interval` as a duration."""
    with PrometheusClient(prometheus, timeout_seconds=5) as client:
        [target] = _eventually(
            client.targets, lambda ts: [t.health for t in ts] == ["up"], "self scraped up"
        )
    assert target.job == "self"
    assert target.scrape_url == f"{prometheus}/metrics"
    assert target.scrape_interval is not None
    assert duration_seconds(target.scrape_interval) == pytest.approx(0.1)


async def test_rules_and_alerts_as_loaded_and_as_evaluated(prometheus: str) -> None:
    """Rule timings are in seconds; a pending alert is visible with its labels."""
    async with AsyncPrometheusClient(prometheus, timeout_seconds=5) as client:
        [group] = await client.rules(kind="alert")
        [rule] = group.rules
        assert (group.name, group.interval) == ("prom-client-test", pytest.approx(0.1))
        assert (rule.name, rule.duration, rule.labels) == (
            "AlwaysPending",
            3600,
            {"severity": "page"},
        )
        assert len((await client.rules())[0].rules) == 2
        alerts = await asyncio.wait_for(_first_alerts(client), timeout=20)
    [alert] = alerts
    assert (alert.name, alert.state, alert.annotations) == (
        "AlwaysPending",
        "pending",
        {"summary": "never fires"},
    )
    assert alert.active_at.tzinfo is not None


def test_runtime_info_and_readiness(prometheus: str) -> None:
    """Start time and config load are real times; a loaded config reads as such."""
    with PrometheusClient(prometheus, timeout_seconds=5) as client:
        info = client.runtime_info()
        assert client.ready()
    assert info.start_time <= datetime.now(UTC)
    assert info.config_loaded_at is not None
    assert info.reload_config_success is True


def test_a_bad_query_names_the_query_and_what_prometheus_said(prometheus: str) -> None:
    """An error answer is a `PrometheusAnswerError` carrying the endpoint and the query."""
    with (
        PrometheusClient(prometheus, timeout_seconds=5) as client,
        pytest.raises(PrometheusAnswerError, match=r"query=rate\(: HTTP 400, Prometheus said"),
    ):
        client.query("rate(")


async def test_nothing_listening_is_unreachable_and_not_ready() -> None:
    """A refused connection is `PrometheusUnreachable`; `ready` says no without raising."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with AsyncPrometheusClient(url, timeout_seconds=2) as client:
        assert not await client.ready()
        with pytest.raises(PrometheusUnreachable, match=f"{url}/api/v1/alerts: Prometheus unr"):
            await client.alerts()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>nope</html>", "body is not JSON: '<html>nope"),
        (b'{"status": "error", "error": "boom"}', "Prometheus said: 'boom'"),
        (b'{"status": "success", "data": {}}', "data.alerts: missing"),
        (
            b'{"status": "success", "data": {"alerts": [{"labels": {}, "state": "odd",'
            b' "activeAt": "2026-12-01T00:00:00Z"}]}}',
            "data.alerts.0.state",
        ),
    ],
)
def test_a_wrong_answer_names_what_was_wrong(body: bytes, said: str) -> None:
    """Every shape error is one `PrometheusError`, naming the field at fault."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with (
        httpx.Client(transport=transport) as http,
        PrometheusClient("http://prometheus.test", timeout_seconds=1, http=http) as client,
        pytest.raises(PrometheusError, match=said),
    ):
        client.alerts()
