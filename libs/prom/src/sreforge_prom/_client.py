"""The Prometheus HTTP API client: `PrometheusClient` (sync) and `AsyncPrometheusClient`.

Both build the same requests and decode the same answers (`_model`); only the transport
differs. Each owns its httpx client unless one is passed in (`http=`), and then leaves
closing it to the caller. A client made here ignores proxy settings from the environment:
a run's Prometheus is reached directly, on loopback or the stack's network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import httpx

from sreforge_prom._errors import PrometheusUnreachable
from sreforge_prom._model import (
    Alert,
    RuleGroup,
    RuntimeInfo,
    Sample,
    Series,
    Target,
    decode_alerts,
    decode_matrix,
    decode_rules,
    decode_runtime_info,
    decode_targets,
    decode_vector,
    envelope,
)
from sreforge_prom._tls import shared_tls_context

__all__ = ["AsyncPrometheusClient", "PrometheusClient"]


@dataclass(frozen=True)
class _Call:
    path: str
    params: dict[str, str]
    endpoint: str
    """What errors name: the URL, with the query when there is one."""


@dataclass(frozen=True)
class _Calls:
    base: str

    def query(self, promql: str, at: datetime | None) -> _Call:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        return _Call("/api/v1/query", params, f"{self.base}/api/v1/query?query={promql}")

    def query_range(self, promql: str, start_ms: int, end_ms: int, step_ms: int) -> _Call:
        params = {
            "query": promql,
            "start": f"{start_ms / 1000:.3f}",
            "end": f"{end_ms / 1000:.3f}",
            "step": f"{step_ms / 1000:.3f}",
        }
        return _Call(
            "/api/v1/query_range", params, f"{self.base}/api/v1/query_range?query={promql}"
        )

    def plain(self, path: str, **params: str) -> _Call:
        return _Call(path, params, f"{self.base}{path}")


class PrometheusClient:
    """A blocking client for one Prometheus at `base_url`; every call waits `timeout_seconds`.

    Raises `PrometheusUnreachable` when Prometheus does not answer and
    `PrometheusAnswerError` when it answers with anything but the expected success.
    """

    def __init__(
        self, base_url: str, *, timeout_seconds: float, http: httpx.Client | None = None
    ) -> None:
        self._calls = _Calls(base_url.rstrip("/"))
        self._owned = http is None
        self._http = http or httpx.Client(
            timeout=timeout_seconds, trust_env=False, verify=shared_tls_context()
        )
        self._timeout = timeout_seconds

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client (when this client made it)."""
        if self._owned:
            self._http.close()

    def query(self, promql: str, *, at: datetime | None = None) -> list[Sample]:
        """An instant query evaluated as of `at` (default: Prometheus's now)."""
        call = self._calls.query(promql, at)
        return decode_vector(self._data(call), call.endpoint)

    def query_range(self, promql: str, *, start_ms: int, end_ms: int, step_ms: int) -> list[Series]:
        """A range query over Unix milliseconds [start_ms, end_ms] every `step_ms`."""
        call = self._calls.query_range(promql, start_ms, end_ms, step_ms)
        return decode_matrix(self._data(call), call.endpoint)

    def alerts(self) -> list[Alert]:
        """Every active (pending or firing) alert."""
        call = self._calls.plain("/api/v1/alerts")
        return decode_alerts(self._data(call), call.endpoint)

    def targets(self) -> list[Target]:
        """The active scrape targets."""
        call = self._calls.plain("/api/v1/targets", state="active")
        return decode_targets(self._data(call), call.endpoint)

    def rules(self, *, kind: str | None = None) -> list[RuleGroup]:
        """The loaded rule groups; `kind` "alert" or "record" keeps only those rules."""
        call = self._calls.plain("/api/v1/rules", **({} if kind is None else {"type": kind}))
        return decode_rules(self._data(call), call.endpoint)

    def runtime_info(self) -> RuntimeInfo:
        """Prometheus's start and last config load."""
        call = self._calls.plain("/api/v1/status/runtimeinfo")
        return decode_runtime_info(self._data(call), call.endpoint)

    def ready(self) -> bool:
        """Whether `/-/ready` answers 200 (never raises)."""
        try:
            return self._http.get(f"{self._calls.base}/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    def _data(self, call: _Call) -> Any:
        try:
            response = self._http.get(
                self._calls.base + call.path, params=call.params, timeout=self._timeout
            )
        except httpx.HTTPError as error:
            raise _unreachable(error, call) from error
        return envelope(response, call.endpoint)


class AsyncPrometheusClient:
    """The asyncio twin of `PrometheusClient`: the same calls, answers and errors."""

    def __init__(
        self, base_url: str, *, timeout_seconds: float, http: httpx.AsyncClient | None = None
    ) -> None:
        self._calls = _Calls(base_url.rstrip("/"))
        self._owned = http is None
        self._http = http or httpx.AsyncClient(
            timeout=timeout_seconds, trust_env=False, verify=shared_tls_context()
        )
        self._timeout = timeout_seconds

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
        """Close the HTTP client (when this client made it)."""
        if self._owned:
            await self._http.aclose()

    async def query(self, promql: str, *, at: datetime | None = None) -> list[Sample]:
        """An instant query evaluated as of `at` (default: Prometheus's now)."""
        call = self._calls.query(promql, at)
        return decode_vector(await self._data(call), call.endpoint)

    async def query_range(
        self, promql: str, *, start_ms: int, end_ms: int, step_ms: int
    ) -> list[Series]:
        """A range query over Unix milliseconds [start_ms, end_ms] every `step_ms`."""
        call = self._calls.query_range(promql, start_ms, end_ms, step_ms)
        return decode_matrix(await self._data(call), call.endpoint)

    async def alerts(self) -> list[Alert]:
        """Every active (pending or firing) alert."""
        call = self._calls.plain("/api/v1/alerts")
        return decode_alerts(await self._data(call), call.endpoint)

    async def targets(self) -> list[Target]:
        """The active scrape targets."""
        call = self._calls.plain("/api/v1/targets", state="active")
        return decode_targets(await self._data(call), call.endpoint)

    async def rules(self, *, kind: str | None = None) -> list[RuleGroup]:
        """The loaded rule groups; `kind` "alert" or "record" keeps only those rules."""
        call = self._calls.plain("/api/v1/rules", **({} if kind is None else {"type": kind}))
        return decode_rules(await self._data(call), call.endpoint)

    async def runtime_info(self) -> RuntimeInfo:
        """Prometheus's start and last config load."""
        call = self._calls.plain("/api/v1/status/runtimeinfo")
        return decode_runtime_info(await self._data(call), call.endpoint)

    async def ready(self) -> bool:
        """Whether `/-/ready` answers 200 (never raises)."""
        try:
            response = await self._http.get(f"{self._calls.base}/-/ready")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _data(self, call: _Call) -> Any:
        try:
            response = await self._http.get(
                self._calls.base + call.path, params=call.params, timeout=self._timeout
            )
        except httpx.HTTPError as error:
            raise _unreachable(error, call) from error
        return envelope(response, call.endpoint)


def _unreachable(error: httpx.HTTPError, call: _Call) -> PrometheusUnreachable:
    return PrometheusUnreachable(f"Prometheus unreachable: {error!r}", endpoint=call.endpoint)
