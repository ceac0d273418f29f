"""How a struck run recovered, read from the run itself (no control run needed).

`recovery` reads a fault's figures from its run's stream and service logs: how long the
restarted service took to start (`engine.ready`), when a service first logged a
redelivered message after the fault (the work that was in flight came back), and when
the run's next event came after the restart. The harness restarts a killed service at
once, so no restart delay is subtracted; a nats-server outage counts as restarted when
it ends (`NATS_DOWN_S` after the strike).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["Recovery", "log_times", "median", "recovery"]

READY = "engine.ready"
REDELIVERED = "message redelivered"


@dataclass(frozen=True)
class Recovery:
    """Seconds from a fault to each sign of its run going on (None: no such sign)."""

    started_s: float | None
    """To the restarted service's `engine.ready` (its start-up)."""
    redelivered_s: float | None
    """To the first redelivery a service logged after the fault (in-flight work back)."""
    next_event_s: float | None
    """To the run's first event after the restart (the run moving on)."""

    @property
    def resumed_s(self) -> float | None:
        """When the work went on: the first redelivery, else the next event."""
        return self.redelivered_s if self.redelivered_s is not None else self.next_event_s


def log_times(text: str, event: str) -> list[datetime]:
    """When each JSON log line of `event` in `text` was written (other lines skipped)."""
    times = []
    for line in text.splitlines():
        if f'"{event}"' not in line:
            continue
        try:
            entry = json.loads(line)
            if entry.get("event") == event:
                times.append(datetime.fromisoformat(entry["timestamp"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return times


def _first_after(times: Iterable[datetime], at: datetime) -> datetime | None:
    later = [time for time in times if time > at]
    return min(later) if later else None


def _since(at: datetime, then: datetime | None) -> float | None:
    return None if then is None else (then - at).total_seconds()


def recovery(
    target: str,
    at: datetime,
    logs: dict[str, str],
    events: Sequence[tuple[str, datetime]],
    outage_s: float,
) -> Recovery:
    """The figures of one fault struck at `at` on `target` (a service, or `nats`, down
    `outage_s`), from the run's service `logs` (by name) and its `events` (type, time)."""
    if target == "nats":
        restarted: datetime | None = at + timedelta(seconds=outage_s)
        watched = list(logs.values())
    else:
        restarted = _first_after(log_times(logs.get(target, ""), READY), at)
        watched = [logs.get(target, "")]
    redelivered = _first_after((t for text in watched for t in log_times(text, REDELIVERED)), at)
    following = None if restarted is None else _first_after((t for _, t in events), restarted)
    started = None if target == "nats" else _since(at, restarted)
    return Recovery(started, _since(at, redelivered), _since(at, following))


def median(values: Iterable[float | None]) -> float | None:
    """The median of the known values; None when there are none."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None
