"""Publishing a batch of trigger events: all acknowledged, or `PublishFailed`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from sreforge_bus import BusError, MessageTooLarge, Published
from sreforge_contracts import Event

from sreforge_trigger._errors import PayloadError, PublishFailed
from sreforge_trigger._events import TriggerEvent
from sreforge_trigger._recent import RecentIds

__all__ = ["Ingest", "IngestResult", "Publish"]

Publish = Callable[[Event], Awaitable[object]]

log = structlog.get_logger("sreforge.trigger")


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What a batch did: events newly stored, and events the bus or memory already had."""

    event_ids: tuple[str, ...]
    published: int
    duplicates: int


class Ingest:
    """Publishes trigger events through `publish`, each acknowledged within `timeout` seconds.

    Ids acknowledged recently are skipped (a bounded in-process memory); the rest are
    published concurrently and remembered only once every one of them is acknowledged.
    """

    def __init__(self, publish: Publish, *, timeout: float, memory: int) -> None:
        self._publish = publish
        self._timeout = timeout
        self._recent = RecentIds(memory)

    async def deliver(self, events: Sequence[TriggerEvent], source: str) -> IngestResult:
        """Publish `events` (from `source`, for logs); `PublishFailed` if any is not acked."""
        fresh = [event for event in events if event.event_id not in self._recent]
        try:
            async with asyncio.timeout(self._timeout):
                results = await asyncio.gather(
                    *(self._publish(event) for event in fresh), return_exceptions=True
                )
        except TimeoutError:
            raise PublishFailed(
                f"trigger: {len(fresh)} event(s) from {source} not acknowledged within "
                f"{self._timeout}s"
            ) from None
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            raise _failed(failures, len(fresh), source)
        for event in fresh:
            self._recent.add(event.event_id)
        stored = sum(1 for r in results if not (isinstance(r, Published) and r.duplicate))
        log.info(
            "trigger.ingested",
            source=source,
            events=len(events),
            published=stored,
            event_ids=[event.event_id for event in fresh],
        )
        return IngestResult(
            event_ids=tuple(event.event_id for event in events),
            published=stored,
            duplicates=len(events) - stored,
        )


def _failed(failures: list[BaseException], total: int, source: str) -> PublishFailed:
    first = failures[0]
    if isinstance(first, MessageTooLarge):
        # Not an outage: a retry would be refused the same way, so it is the sender's 422.
        raise PayloadError(f"{source}: an event of this body is too large for the bus: {first}")
    if not isinstance(first, BusError | OSError | TimeoutError):
        raise first  # a bug, not an outage: let it surface as one
    log.warning("trigger.publish_failed", source=source, failed=len(failures), error=str(first))
    return PublishFailed(
        f"trigger: {len(failures)} of {total} event(s) from {source} not acknowledged: {first}"
    )
