"""Samples for a stretch the oracle did not watch live, read back from Prometheus's own history.

When the oracle restarts mid-grading, the time it was down is not left as a hole:
Prometheus kept evaluating the rules and scraping the load the whole time, so the
samples the oracle would have taken are range queries over its TSDB, at the same
cadence. The `ALERTS` series carries every active alert with its state, exactly
what `/api/v1/alerts` shows live.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sreforge_contracts import AlertState

from sreforge_oracle._model import GradingSample, ObservedAlert
from sreforge_oracle._probe import PrometheusProbe, target_state

__all__ = ["MAX_POINTS", "history_samples"]

MAX_POINTS = 10_000
"""Prometheus refuses range queries of more than 11,000 points per series."""

_Series = list[tuple[dict[str, str], dict[int, float | None]]]


async def history_samples(
    probe: PrometheusProbe,
    *,
    started_at: datetime,
    start: datetime,
    end: datetime,
    step_seconds: float,
) -> list[GradingSample]:
    """One sample per step from `start` to `end` as Prometheus recorded them.

    The probe's target alert, SLI, load (and ok-ratio, request-count) queries are read
    at each step, in pieces of at most `MAX_POINTS` steps. The load generator's own
    latency histogram and the monitoring plane have no history here: those samples
    carry neither. Raises `ProbeError` if Prometheus cannot answer.
    """
    start_ms, end_ms = _ms(start), _ms(end)
    if end_ms < start_ms:
        return []
    step_ms = max(1, round(step_seconds * 1000))
    samples: list[GradingSample] = []
    # Prometheus caps the points per query, so a long stretch is read in pieces.
    for first_ms in range(start_ms, end_ms + 1, step_ms * MAX_POINTS):
        last_ms = min(end_ms, first_ms + step_ms * (MAX_POINTS - 1))
        samples += await _stretch(probe, started_at, first_ms, last_ms, step_ms)
    return samples


async def _stretch(
    probe: PrometheusProbe, started_at: datetime, start_ms: int, end_ms: int, step_ms: int
) -> list[GradingSample]:
    span = {"start_ms": start_ms, "end_ms": end_ms, "step_ms": step_ms}
    alerts = await probe.query_range("ALERTS", **span)
    sli = await probe.query_range(probe.sli_promql, **span)
    target = await probe.query_range(probe.load_promql[0], **span)
    achieved = await probe.query_range(probe.load_promql[1], **span)
    service, app, load = [
        [] if promql is None else await probe.query_range(promql, **span)
        for promql in (probe.service_promql, *probe.count_promql)
    ]
    samples = []
    for at_ms in range(start_ms, end_ms + 1, step_ms):
        observed = _alerts_at(alerts, at_ms)
        at = datetime.fromtimestamp(at_ms / 1000, UTC)
        state: AlertState = target_state(observed, probe.alert_name)
        samples.append(
            GradingSample(
                at=at,
                offset_seconds=max(0.0, (at - started_at).total_seconds()),
                target_state=state,
                alerts=tuple(observed),
                sli=_max_at(sli, at_ms),
                load_target_rps=_max_at(target, at_ms),
                load_achieved_rps=_max_at(achieved, at_ms),
                service_ok_ratio=_max_at(service, at_ms),
                app_requests=_max_at(app, at_ms),
                load_requests=_max_at(load, at_ms),
                from_history=True,
            )
        )
    return samples


def _ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


def _alerts_at(series: _Series, at_ms: int) -> list[ObservedAlert]:
    found = []
    for labels, points in series:
        state = labels.get("alertstate")
        name = labels.get("alertname")
        if at_ms not in points or not name or state not in ("firing", "pending"):
            continue
        kept = {k: v for k, v in labels.items() if k not in ("__name__", "alertstate")}
        found.append(ObservedAlert(name=name, state=state, labels=kept))
    return found


def _max_at(series: _Series, at_ms: int) -> float | None:
    """The largest value at `at_ms`, as the live probe reads an instant vector."""
    values = [v for _, points in series if (v := points.get(at_ms)) is not None]
    return max(values) if values else None
