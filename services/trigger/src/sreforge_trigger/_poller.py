"""A fallback source: poll Prometheus `/api/v1/alerts` and report firing/resolved changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import httpx
import structlog
from sreforge_contracts import Trigger
from sreforge_prom import Alert, AsyncPrometheusClient, PrometheusError

from sreforge_trigger._errors import PublishFailed
from sreforge_trigger._events import (
    TriggerEvent,
    label_fingerprint,
    occurrence_id,
    trigger_event,
)
from sreforge_trigger._ingest import Ingest

__all__ = ["POLLER_SOURCE", "AlertPoller", "alert_changes"]

POLLER_SOURCE = "prometheus"

log = structlog.get_logger("sreforge.trigger.poller")


Firing = Mapping[str, Trigger]


def alert_changes(
    known: Firing, polled: list[Alert], route: str | None
) -> tuple[list[TriggerEvent], dict[str, Trigger]]:
    """Events for alerts newly firing or gone since `known`, and the new firing set.

    An occurrence is its label fingerprint plus `activeAt`; pending alerts and
    alerts without an `alertname` label are not reported.
    """
    now: dict[str, Trigger] = {}
    for alert in polled:
        name = alert.name
        if alert.state != "firing" or not name:
            continue
        fingerprint = label_fingerprint(alert.labels)
        key = f"{fingerprint}@{alert.active_at.isoformat()}"
        now[key] = known.get(key) or _trigger(alert, name, fingerprint, route)
    events = [_event(trigger, route) for key, trigger in now.items() if key not in known]
    events += [
        _event(trigger.model_copy(update={"status": "resolved"}), route)
        for key, trigger in known.items()
        if key not in now
    ]
    return events, now


def _trigger(alert: Alert, name: str, fingerprint: str, route: str | None) -> Trigger:
    trigger = Trigger(
        source=POLLER_SOURCE,
        alert_name=name,
        severity=alert.labels.get("severity"),
        labels=dict(alert.labels),
        route=route,
        annotations=alert.annotations,
        fired_at=alert.active_at,
        fingerprint=fingerprint,
    )
    return trigger.model_copy(update={"signals": [trigger.primary()]})


def _event(trigger: Trigger, route: str | None) -> TriggerEvent:
    parts = (POLLER_SOURCE, route or "", trigger.fingerprint or "", trigger.fired_at.isoformat())
    return trigger_event(trigger, occurrence_id(trigger.status, *parts, trigger.status))


class AlertPoller:
    """Polls `base_url`'s `/api/v1/alerts` every `interval` seconds until stopped.

    A failed poll or publish is logged and retried on the next tick; the firing set
    only advances once its events are acknowledged, so nothing is lost. Each poll may
    take up to `interval`. `http` shares an httpx client (tests pass a mock transport).
    """

    def __init__(
        self,
        base_url: str,
        ingest: Ingest,
        *,
        interval: float,
        route: str | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._url = base_url.rstrip("/")
        self._ingest = ingest
        self._interval = interval
        self._route = route
        self._http = http
        self._firing: dict[str, Trigger] = {}

    def client(self) -> AsyncPrometheusClient:
        """A Prometheus client for this poller's URL, timeout and httpx client."""
        return AsyncPrometheusClient(self._url, timeout_seconds=self._interval, http=self._http)

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set."""
        async with self.client() as prometheus:
            while not stop.is_set():
                await self.poll_once(prometheus)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._interval)

    async def poll_once(self, prometheus: AsyncPrometheusClient) -> int:
        """One poll: publish the changes; return how many events it published (0 on failure)."""
        try:
            polled = await prometheus.alerts()
            events, firing = alert_changes(self._firing, polled, self._route)
            if events:
                await self._ingest.deliver(events, POLLER_SOURCE)
        except (PrometheusError, PublishFailed) as err:
            log.warning("trigger.poll_failed", url=self._url, error=str(err))
            return 0
        self._firing = firing
        return len(events)
