"""Reading the stream back: tailing with an ordered, ephemeral consumer, or stored messages
one by one (which needs no consumer, so no permission to create one)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import nats.errors
import nats.js.errors
from nats.js.api import DeliverPolicy

from sreforge_bus._connection import Bus
from sreforge_bus._names import STREAM

__all__ = ["RawMessage", "follow", "read_stored"]


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


async def read_stored(
    bus: Bus, subject: str = "sreforge.>", *, upto: int | None = None
) -> AsyncGenerator[RawMessage, None]:
    """Yield the stored messages on `subject` in stream order, up to sequence `upto`.

    Ends at the last stored match (it does not wait for new ones). Each message is one
    direct get of the next match, so no consumer is created: a service may read the
    stream back without the right to create consumers, which could also rewrite a durable.
    """
    seq = 1
    while upto is None or seq <= upto:
        try:
            found = await bus.js.get_msg(STREAM, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return
        if found.seq is None or found.subject is None or found.time is None:
            return
        if upto is not None and found.seq > upto:
            return
        yield RawMessage(
            subject=found.subject,
            data=found.data or b"",
            seq=found.seq,
            time=found.time,
            headers=dict(found.headers or {}),
        )
        seq = found.seq + 1
