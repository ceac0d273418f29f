"""The oracle's only I/O: the run's Prometheus (through `sreforge_prom`), load generator and AM."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Self

import httpx
from sreforge_contracts import AlertState
from sreforge_prom import (
    AsyncPrometheusClient,
    PrometheusError,
    duration_seconds,
    shared_tls_context,
)

from sreforge_oracle._errors import ProbeError
from sreforge_oracle._exposition import LoadgenReading, read_loadgen
from sreforge_oracle._model import GradingSample, MonitoringSnapshot, ObservedAlert
from sreforge_oracle._plane import (
    alertmanager_status,
    rules_fingerprint,
    runtime_info,
    targets_fingerprint,
)

__all__ = ["PrometheusProbe", "target_state"]

_SCRAPE_TRIES = 2


class _Miss(enum.Enum):
    """What a scrape of the load generator gave instead of its text."""

    GONE = "its port refused, or something else answered with an error"
    SILENT = "no answer in time with its port open"


def target_state(alerts: Sequence[ObservedAlert], name: str) -> AlertState:
    """The target alert's state: firing if any of its series fires, else pending, else inactive."""
    states = {alert.state for alert in alerts if alert.name == name}
    if "firing" in states:
        return "firing"
    return "pending" if "pending" in states else "inactive"


class PrometheusProbe:
    """Reads one run's Prometheus: the target alert, every active alert, the SLI and the load.

    Alerts come from `/api/v1/alerts` (Prometheus, not Alertmanager: no
    `group_wait` lag, and pending is visible). The SLI and the load rates are
    instant queries; a query without a value (empty, NaN, infinite) gives
    `None`, never 0. With `loadgen_metrics_url`, the load rates are read from
    the generator's own `/metrics` instead (no scrape lag), tried twice; a
    generator whose port refuses (or answers an error) reads as no load data, one
    that does not answer in time as an unobserved load (`load_unobserved`). With
    `service_ok_promql`, each sample also reads the load generator's ok ratio
    (`loadgen_ok_ratio`, from its `/metrics` too when `loadgen_metrics_url` is
    set). That scrape, one per sample, also gives the generator's latency
    histogram (its count, and its bucket at `client_objective_seconds`) and p99
    gauge. `app_requests_promql` and
    `load_requests_promql` are read when set; with `read_monitoring`, each sample
    also reads the monitoring plane (Prometheus's runtime info, rules and targets,
    and `alertmanager_url`'s status; an Alertmanager that does not answer reads as
    such, never as an error), at most once per `pace_monitoring` interval. Prometheus
    failures (`sreforge_prom.PrometheusError`) raise `ProbeError` with the same message
    and endpoint.
    """

    def __init__(
        self,
        base_url: str,
        *,
        alert_name: str,
        sli_promql: str,
        load_target_promql: str = "sum(loadgen_target_rps)",
        load_achieved_promql: str = "sum(loadgen_achieved_rps)",
        loadgen_metrics_url: str | None = None,
        service_ok_promql: str | None = None,
        client_objective_seconds: float | None = None,
        app_requests_promql: str | None = None,
        load_requests_promql: str | None = None,
        read_monitoring: bool = False,
        alertmanager_url: str | None = None,
        timeout_seconds: float = 2.0,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._alert_name = alert_name
        self._sli_promql = sli_promql
        self._load_promql = (load_target_promql, load_achieved_promql)
        self._loadgen_url = loadgen_metrics_url
        self._service_promql = service_ok_promql
        self._objective = client_objective_seconds
        self._count_promql = (app_requests_promql, load_requests_promql)
        self._read_monitoring = read_monitoring
        self._monitoring_every = 0.0
        self._monitoring_read_at: datetime | None = None
        self._alertmanager = None if alertmanager_url is None else alertmanager_url.rstrip("/")
        self._client = httpx.AsyncClient(timeout=timeout_seconds, verify=shared_tls_context())
        self._prometheus = AsyncPrometheusClient(
            self._base, timeout_seconds=timeout_seconds, http=self._client
        )

    @property
    def alert_name(self) -> str:
        """The target alert."""
        return self._alert_name

    @property
    def sli_promql(self) -> str:
        """The SLI query."""
        return self._sli_promql

    @property
    def load_promql(self) -> tuple[str, str]:
        """The (target, achieved) load queries on Prometheus."""
        return self._load_promql

    @property
    def service_promql(self) -> str | None:
        """The load generator's ok-ratio query, or `None` when the run is not gated on it."""
        return self._service_promql

    @property
    def count_promql(self) -> tuple[str | None, str | None]:
        """The (app, load) request-count queries, each `None` when not read."""
        return self._count_promql

    def pace_monitoring(self, seconds: float) -> None:
        """Read the monitoring plane only on a sample `seconds` or more after the last reading.

        The plane changes only by a restart, a reload or a new rule or target, and each
        leaves its mark in every later reading (a start or load time, a fingerprint), so a
        reading per scrape interval misses nothing that a reading per sample would catch;
        it spares Prometheus and the oracle four requests out of eight on most samples.
        """
        self._monitoring_every = max(0.0, seconds)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def sample(self, *, at: datetime, offset_seconds: float) -> GradingSample:
        """Take one sample: all reads run concurrently; any Prometheus failure raises.

        Every query is evaluated as of `at`, not whenever it runs: a sample taken late on a
        loaded machine would otherwise read a later scrape than the history samples that
        fill the gap before it, and a counter would seem to go back.
        """
        app_promql, load_promql = self._count_promql
        try:
            async with asyncio.TaskGroup() as group:
                alerts_task = group.create_task(self.alerts())
                sli_task = group.create_task(self.query(self._sli_promql, at=at))
                load_task = group.create_task(self._load_reading(at))
                app_task = group.create_task(self._maybe_query(app_promql, at))
                count_task = group.create_task(self._maybe_query(load_promql, at))
                plane_task = group.create_task(self._maybe_monitoring(at))
        except* ProbeError as failures:
            raise failures.exceptions[0] from None
        alerts, load = alerts_task.result(), load_task.result()
        return GradingSample(
            at=at,
            offset_seconds=offset_seconds,
            target_state=target_state(alerts, self._alert_name),
            alerts=tuple(alerts),
            sli=sli_task.result(),
            load_achieved_rps=load.achieved_rps,
            load_target_rps=load.target_rps,
            service_ok_ratio=load.ok_ratio if self._service_promql is not None else None,
            client_requests=load.client_requests,
            client_within_objective=load.client_within_objective,
            client_p99_seconds=load.client_p99_seconds,
            load_unobserved=not load.observed,
            app_requests=app_task.result(),
            load_requests=count_task.result(),
            monitoring=plane_task.result(),
        )

    async def monitoring(self) -> MonitoringSnapshot:
        """The monitoring plane now: Prometheus's start, config load, rules, targets, and AM."""
        prometheus = self._prometheus
        with _as_probe_error():
            try:
                async with asyncio.TaskGroup() as group:
                    info = group.create_task(prometheus.runtime_info())
                    rules = group.create_task(prometheus.rules())
                    targets = group.create_task(prometheus.targets())
                    manager = group.create_task(self.alertmanager())
            except* PrometheusError as failures:
                raise failures.exceptions[0] from None
        started, loaded, reload_ok = runtime_info(info.result())
        fingerprint, jobs = targets_fingerprint(targets.result(), f"{self._base}/api/v1/targets")
        am = manager.result()
        return MonitoringSnapshot(
            prometheus_started_at=started,
            prometheus_config_loaded_at=loaded,
            prometheus_reload_ok=reload_ok,
            rules=rules_fingerprint(rules.result()),
            targets=fingerprint,
            jobs=jobs,
            alertmanager_started_at=None if am is None else am[0],
            alertmanager_config=None if am is None else am[1],
        )

    async def alertmanager(self) -> tuple[datetime, str] | None:
        """Alertmanager's (start time, config fingerprint); `None` when it does not answer."""
        if self._alertmanager is None:
            return None
        try:
            response = await self._client.get(f"{self._alertmanager}/api/v2/status")
            response.raise_for_status()
            return alertmanager_status(response.json())
        except (httpx.HTTPError, ValueError):
            return None

    async def _maybe_query(self, promql: str | None, at: datetime | None = None) -> float | None:
        return None if promql is None else await self.query(promql, at=at)

    async def _maybe_monitoring(self, at: datetime) -> MonitoringSnapshot | None:
        if not self._read_monitoring:
            return None
        last = self._monitoring_read_at
        if last is not None and 0 <= (at - last).total_seconds() < self._monitoring_every:
            return None
        snapshot = await self.monitoring()
        self._monitoring_read_at = at
        return snapshot

    async def _load_reading(self, at: datetime | None = None) -> LoadgenReading:
        """The load as one scrape of the generator gives it, or from Prometheus without its URL."""
        if self._loadgen_url is not None:
            text = await self._scrape(self._loadgen_url)
            if text is _Miss.GONE:
                return LoadgenReading()  # nothing listens, or not the generator: it died
            if text is _Miss.SILENT:
                return LoadgenReading(observed=False)
            return read_loadgen(text, self._loadgen_url, self._objective)
        target, achieved, ok = await asyncio.gather(
            *(self._maybe_query(q, at) for q in (*self._load_promql, self._service_promql))
        )
        return LoadgenReading(target_rps=target, achieved_rps=achieved, ok_ratio=ok)

    async def alerts(self) -> list[ObservedAlert]:
        """Every active (firing or pending) alert with its labels."""
        with _as_probe_error():
            alerts = await self._prometheus.alerts()
        for alert in alerts:
            if not alert.name:
                raise ProbeError(
                    f"alert without alertname: {alert.labels!r:.200}",
                    endpoint=f"{self._base}/api/v1/alerts",
                )
        return [ObservedAlert(name=a.name, state=a.state, labels=a.labels) for a in alerts]

    async def query(self, promql: str, *, at: datetime | None = None) -> float | None:
        """An instant query's value: the largest of a vector's samples, or `None` without one.

        Evaluated as of `at` when given, else at Prometheus's now. NaN and infinities are
        no value.
        """
        with _as_probe_error():
            samples = await self._prometheus.query(promql, at=at)
        present = [sample.value for sample in samples if math.isfinite(sample.value)]
        return max(present) if present else None

    async def query_range(
        self, promql: str, *, start_ms: int, end_ms: int, step_ms: int
    ) -> list[tuple[dict[str, str], dict[int, float | None]]]:
        """A range query (Unix milliseconds): each series' labels and its values by timestamp."""
        with _as_probe_error():
            series = await self._prometheus.query_range(
                promql, start_ms=start_ms, end_ms=end_ms, step_ms=step_ms
            )
        return [
            (s.labels, {at: v if math.isfinite(v) else None for at, v in s.values.items()})
            for s in series
        ]

    async def rule_timing(self, alert: str) -> tuple[float, float]:
        """The alerting rule's (group evaluation interval, `for` duration) in seconds."""
        with _as_probe_error():
            groups = await self._prometheus.rules(kind="alert")
        for group in groups:
            rule = next((r for r in group.rules if r.name == alert), None)
            if rule is not None and group.interval > 0:
                return group.interval, rule.duration or 0.0
        raise ProbeError(
            f"no alerting rule named {alert!r} is loaded", endpoint=f"{self._base}/api/v1/rules"
        )

    async def scrape_interval(self) -> float | None:
        """The longest scrape interval (seconds) of the active targets; `None` if none says."""
        with _as_probe_error():
            targets = await self._prometheus.targets()
        try:
            found = [duration_seconds(t.scrape_interval) for t in targets if t.scrape_interval]
        except ValueError as error:
            raise ProbeError(str(error), endpoint=f"{self._base}/api/v1/targets") from error
        return max(found) if found else None

    async def load(self) -> tuple[float | None, float | None]:
        """The load generator's (target, achieved) rates in requests per second."""
        reading = await self._load_reading()
        return reading.target_rps, reading.achieved_rps

    async def service_ok_ratio(self) -> float | None:
        """The share of the load generator's checked answers that were ok; `None` unread."""
        if self._service_promql is None:
            return None
        return (await self._load_reading()).ok_ratio

    async def _scrape(self, url: str) -> str | _Miss:
        """The generator's exposition text, or why not, after at most two tries.

        One failed read is no verdict on a loaded host (the generator, or this loop, may
        lag past the timeout once), so a failure is retried at once. `GONE` when the last
        try was refused (nothing listens: the process is gone) or answered with an error
        status (not the generator); `SILENT` when it timed out or broke off with the
        port open: the harness could not observe the load.
        """
        outcome = _Miss.SILENT
        for _ in range(_SCRAPE_TRIES):
            try:
                response = await self._client.get(url)
            except httpx.HTTPError as error:
                outcome = _Miss.GONE if _refused(error) else _Miss.SILENT
                continue
            if response.is_success:
                return response.text
            outcome = _Miss.GONE
        return outcome


def _refused(error: BaseException) -> bool:
    """Whether the connection was refused (anywhere in the exception's chain)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def _as_probe_error() -> Iterator[None]:
    """The oracle's `ProbeError` for the client's `PrometheusError`, same text and endpoint."""
    try:
        yield
    except PrometheusError as error:
        raise ProbeError(error.message, endpoint=error.endpoint) from error
