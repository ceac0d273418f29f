"""What the Prometheus HTTP API answers, as typed values, and the pure decoding of it.

Each `decode_*` takes the `data` of a success envelope (`envelope` checks that) and the
endpoint it came from, and raises `PrometheusAnswerError` naming the field at fault.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

import httpx
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from sreforge_prom._errors import PrometheusAnswerError

__all__ = [
    "Alert",
    "Rule",
    "RuleGroup",
    "RuntimeInfo",
    "Sample",
    "Series",
    "Target",
    "decode_alerts",
    "decode_matrix",
    "decode_rules",
    "decode_runtime_info",
    "decode_targets",
    "decode_vector",
    "envelope",
]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Sample(_Answer):
    """One instant-query sample (a scalar result is one sample without labels)."""

    labels: dict[str, str] = Field(default_factory=dict)
    value: float
    """As Prometheus gave it: NaN and ±Inf included."""


class Series(_Answer):
    """One range-query series: its labels and its values by Unix time in milliseconds."""

    labels: dict[str, str]
    values: dict[int, float]


class Alert(_Answer):
    """One active alert of `/api/v1/alerts` (Prometheus's view: pending is visible)."""

    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    state: Literal["pending", "firing"]
    active_at: AwareDatetime = Field(alias="activeAt")

    @property
    def name(self) -> str:
        """The `alertname` label ("" when missing)."""
        return self.labels.get("alertname", "")


class Target(_Answer):
    """One scrape target of `/api/v1/targets`."""

    labels: dict[str, str]
    scrape_url: str = Field(alias="scrapeUrl")
    health: str = "unknown"
    scrape_interval: str | None = Field(default=None, alias="scrapeInterval")
    """A Prometheus duration (`duration_seconds` reads it)."""

    @property
    def job(self) -> str:
        """The `job` label ("" when missing)."""
        return self.labels.get("job", "")


class Rule(_Answer):
    """One rule as loaded (`duration` and `keep_firing_for` in seconds, alerting rules only)."""

    type: str
    name: str
    query: str
    duration: float | None = None
    keep_firing_for: float | None = Field(default=None, alias="keepFiringFor")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class RuleGroup(_Answer):
    """One rule group of `/api/v1/rules` (`interval` in seconds)."""

    name: str
    file: str | None = None
    interval: float
    limit: int | None = None
    rules: list[Rule]


class RuntimeInfo(_Answer):
    """`/api/v1/status/runtimeinfo`: when Prometheus started and last loaded its config."""

    start_time: AwareDatetime = Field(alias="startTime")
    last_config_time: datetime | None = Field(default=None, alias="lastConfigTime")
    reload_config_success: bool | None = Field(default=None, alias="reloadConfigSuccess")

    @property
    def config_loaded_at(self) -> datetime | None:
        """The last config load; `None` for Go's zero time ("never")."""
        moment = self.last_config_time
        return None if moment is None or moment.year <= 1 else moment


def envelope(response: httpx.Response, endpoint: str) -> Any:
    """The `data` of a success answer; anything else raises `PrometheusAnswerError`."""
    try:
        body = response.json()
    except ValueError as error:
        raise PrometheusAnswerError(
            f"HTTP {response.status_code}, body is not JSON: {response.text[:120]!r}",
            endpoint=endpoint,
        ) from error
    if not isinstance(body, dict) or body.get("status") != "success":
        said = body.get("error") if isinstance(body, dict) else None
        raise PrometheusAnswerError(
            f"HTTP {response.status_code}, Prometheus said: {said or body!r}", endpoint=endpoint
        )
    return body.get("data")


_T = TypeVar("_T")


def _validate(adapter: TypeAdapter[_T], raw: Any, where: str, endpoint: str) -> _T:
    try:
        return adapter.validate_python(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in (where, *first["loc"]) if part != "")
        raise PrometheusAnswerError(
            f"{field}: {first['msg']} (got {first.get('input')!r:.120})", endpoint=endpoint
        ) from None


def _field(data: Any, key: str, endpoint: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise PrometheusAnswerError(f"data.{key}: missing (got {data!r:.200})", endpoint=endpoint)
    return data[key]


_RAW_VECTOR = TypeAdapter(list[tuple[dict[str, str], tuple[float, str]]])
_RAW_MATRIX = TypeAdapter(list[tuple[dict[str, str], list[tuple[float, str]]]])
_ALERTS = TypeAdapter(list[Alert])
_TARGETS = TypeAdapter(list[Target])
_GROUPS = TypeAdapter(list[RuleGroup])
_RUNTIME = TypeAdapter(RuntimeInfo)


def _number(raw: str, endpoint: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise PrometheusAnswerError(
            f"sample value {raw!r} is not a number", endpoint=endpoint
        ) from None


def decode_vector(data: Any, endpoint: str) -> list[Sample]:
    """An instant query's samples: a vector's, or a scalar as one sample without labels."""
    kind = data.get("resultType") if isinstance(data, dict) else None
    result = _field(data, "result", endpoint)
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        return [Sample(value=_number(str(result[1]), endpoint))]
    if kind != "vector" or not isinstance(result, list):
        raise PrometheusAnswerError(
            f"expected a scalar or vector result, got {data!r:.200}", endpoint=endpoint
        )
    raw = [
        (item.get("metric"), item.get("value")) if isinstance(item, dict) else item
        for item in result
    ]
    pairs = _validate(_RAW_VECTOR, raw, "data.result", endpoint)
    return [Sample(labels=labels, value=_number(value, endpoint)) for labels, (_, value) in pairs]


def decode_matrix(data: Any, endpoint: str) -> list[Series]:
    """A range query's series, values keyed by Unix milliseconds."""
    result = _field(data, "result", endpoint)
    if data.get("resultType") != "matrix" or not isinstance(result, list):
        raise PrometheusAnswerError(
            f"expected a matrix result, got {data!r:.200}", endpoint=endpoint
        )
    raw = [
        (item.get("metric"), item.get("values")) if isinstance(item, dict) else item
        for item in result
    ]
    pairs = _validate(_RAW_MATRIX, raw, "data.result", endpoint)
    return [
        Series(
            labels=labels,
            values={round(at * 1000): _number(value, endpoint) for at, value in points},
        )
        for labels, points in pairs
    ]


def decode_alerts(data: Any, endpoint: str) -> list[Alert]:
    """`/api/v1/alerts`: every active alert."""
    return _validate(_ALERTS, _field(data, "alerts", endpoint), "data.alerts", endpoint)


def decode_targets(data: Any, endpoint: str) -> list[Target]:
    """`/api/v1/targets`: the active targets."""
    raw = _field(data, "activeTargets", endpoint)
    return _validate(_TARGETS, raw, "data.activeTargets", endpoint)


def decode_rules(data: Any, endpoint: str) -> list[RuleGroup]:
    """`/api/v1/rules`: every rule group as loaded."""
    return _validate(_GROUPS, _field(data, "groups", endpoint), "data.groups", endpoint)


def decode_runtime_info(data: Any, endpoint: str) -> RuntimeInfo:
    """`/api/v1/status/runtimeinfo`."""
    return _validate(_RUNTIME, data, "data", endpoint)
