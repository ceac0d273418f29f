"""Tailing the stream with an ordered, ephemeral consumer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import nats.errors
from nats.js.api import DeliverPolicy

from sreforge_bus._connection import Bus
from sreforge_bus._names import STREAM

__all__ = ["RawMessage", "follow"]


@dataclass(frozen=True, slots=True)
class RawMessage:
    """A stored message as read back from stream `SREFORGE`."""

    subject: str
    data: bytes
    seq: int
    time: datetime
    headers: Mapping[str, str] = field(default_factory=dict)


async def follow(
    bus: Bus, subject: str = "sreforge.>", *, deliver: Literal["all", "new"] = "all"
) -> AsyncGenerator[RawMessage, None]:
    """Yield messages on `subject` in stream order, from the start or only new ones.

    Uses an ordered consumer: nothing is acked, nothing durable is left behind,
    and gaps are repaired by the client. Stop by breaking out of the loop.
    """
    policy = DeliverPolicy.ALL if deliver == "all" else DeliverPolicy.NEW
    sub = await bus.js.subscribe(
        subject, stream=STREAM, ordered_consumer=True, deliver_policy=policy
    )
    try:
        async for msg in sub.messages:
            meta = msg.metadata
            yield RawMessage(
                subject=msg.subject,
                data=msg.data,
                seq=meta.sequence.stream,
                time=meta.timestamp,
                headers=dict(msg.headers or {}),
            )
    finally:
        with contextlib.suppress(nats.errors.Error):
            await sub.unsubscribe()
