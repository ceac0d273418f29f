"""Keeping pull requests open on a durable consumer so messages flow without a per-message fetch.

The feed holds at most `capacity` messages "in credit": requested from the
server but not yet received, plus those being handled. Whenever enough credit
frees up it sends one more pull request (batch = the free credit). Each request
expires on the server, which then reports how many of its messages were never
sent (status 408 with `Nats-Pending-Messages`), returning that credit. Pull
requests die with a restarted server, so a reconnect, or silence longer than
three idle heartbeats, resets the credit and pulls afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import nats.errors
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

__all__ = ["PullFeed"]

log = structlog.get_logger("sreforge.bus.pull")

_EXPIRES_S = 20.0
_HEARTBEAT_S = 2.0
_SILENCE_S = 3 * _HEARTBEAT_S
_RETRY_PAUSE_S = 0.25
_STATUS = "Status"
_PENDING_MESSAGES = "Nats-Pending-Messages"
_HEARTBEAT = "100"
_PULL_ENDED = ("408", "409")


class PullFeed:
    """Hands every message of one durable pull consumer to `deliver`, within `capacity`."""

    def __init__(
        self,
        nc: Client,
        *,
        stream: str,
        durable: str,
        capacity: int,
        busy: Callable[[], int],
        deliver: Callable[[Msg], None],
    ) -> None:
        self._nc = nc
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._capacity = capacity
        self._threshold = max(1, capacity // 2)
        self._busy = busy
        self._deliver = deliver
        self._inbox = nc.new_inbox()
        self._sub: Subscription | None = None
        self._outstanding = 0
        self._last_heard = time.monotonic()
        self._changed = asyncio.Event()
        self._stopping = False
        self._pause_s = 0.0
        self._log = log.bind(durable=durable)

    async def run(self) -> None:
        """Subscribe and keep pull requests topped up until `stop()`."""
        self._sub = await self._nc.subscribe(self._inbox, cb=self._receive)
        while not self._stopping and not self._nc.is_closed:
            if self._pause_s:
                await self._wait(self._pause_s)
                self._pause_s = 0.0
                continue
            free = self._capacity - self._busy() - self._outstanding
            if free >= self._threshold or (free > 0 and self._outstanding == 0):
                await self._request(free)
                continue
            if not await self._wait(_HEARTBEAT_S):
                self._check_silence()

    async def close(self) -> None:
        """Stop listening; messages still sent to the dead inbox come back after ack_wait."""
        if self._sub is not None:
            with contextlib.suppress(nats.errors.Error, OSError):
                await self._sub.unsubscribe()

    def stop(self) -> None:
        """Send no more pull requests; late arrivals are nak'ed for prompt redelivery."""
        self._stopping = True
        self._changed.set()

    def changed(self) -> None:
        """Re-check the credit (a handler finished)."""
        self._changed.set()

    def reset(self) -> None:
        """Forget open pull requests (the server lost them) and pull again."""
        self._outstanding = 0
        self._changed.set()

    async def _wait(self, seconds: float) -> bool:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout=seconds)
        except TimeoutError:
            return False
        return True

    async def _request(self, batch: int) -> None:
        body = {
            "batch": batch,
            "expires": int(_EXPIRES_S * 1e9),
            "idle_heartbeat": int(_HEARTBEAT_S * 1e9),
        }
        try:
            await self._nc.publish(self._next_subject, json.dumps(body).encode(), self._inbox)
        except (nats.errors.Error, OSError) as err:
            self._log.warning("pull request failed; retrying", error=repr(err))
            self._pause_s = _RETRY_PAUSE_S
            return
        self._outstanding += batch
        self._last_heard = time.monotonic()

    def _check_silence(self) -> None:
        if self._outstanding and time.monotonic() - self._last_heard > _SILENCE_S:
            self._log.warning("no heartbeat from the server; pulling afresh")
            self._outstanding = 0

    async def _receive(self, msg: Msg) -> None:
        self._last_heard = time.monotonic()
        status = msg.headers.get(_STATUS) if msg.headers else None
        if status is not None:
            self._on_status(status, msg)
            return
        self._outstanding = max(0, self._outstanding - 1)
        if self._stopping:
            with contextlib.suppress(nats.errors.Error):
                await msg.nak()
            return
        self._deliver(msg)

    def _on_status(self, status: str, msg: Msg) -> None:
        if status == _HEARTBEAT:
            return
        headers = msg.headers or {}
        pending = headers.get(_PENDING_MESSAGES)
        if status in _PULL_ENDED and pending is not None and pending.isdigit():
            self._outstanding = max(0, self._outstanding - int(pending))
        else:
            # e.g. 503 (JetStream not ready yet, consumer missing) or a 409 without counts.
            self._log.warning(
                "pull request ended", status=status, description=headers.get("Description")
            )
            self._outstanding = 0
            self._pause_s = _RETRY_PAUSE_S
        self._changed.set()
