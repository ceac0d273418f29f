"""The durable pull-consumer worker loop: bounded concurrency, ack after the handler."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import nats.errors
import nats.js.errors
import structlog
from nats.aio.msg import Msg
from sreforge_contracts import MAX_MESSAGE_BYTES, RUN_ID_PATTERN, Event

from sreforge_bus._bootstrap import ConsumerSpec
from sreforge_bus._connection import Bus, wire_size
from sreforge_bus._errors import BusError
from sreforge_bus._names import (
    DEADLETTER_PREFIX,
    HEADER_DEADLETTER_BODY_DROPPED,
    HEADER_DEADLETTER_DURABLE,
    HEADER_DEADLETTER_ERROR,
    HEADER_DEADLETTER_NUM_DELIVERED,
    HEADER_DEADLETTER_RUN_ID,
    HEADER_DEADLETTER_SEQ,
    HEADER_DEADLETTER_SUBJECT,
    HEADER_MSG_ID,
    HEADER_REPLY_TO,
)
from sreforge_bus._pull import PullFeed

__all__ = ["Delivery", "Handler", "Worker", "misplaced", "run_of_subject"]

T = TypeVar("T")
_EVENT_SUBJECT = re.compile(r"^sreforge\.(run\.[^.]+\.[^.]+|trigger\.[^.]+)$")
log = structlog.get_logger("sreforge.bus.worker")

_MAX_ERROR_CHARS = 400
_RUN_ID = re.compile(RUN_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a handler knows about the message it is handling, besides its parsed body."""

    subject: str
    data: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    num_delivered: int = 1
    stream_seq: int = 0

    @property
    def reply_to(self) -> str | None:
        """The inbox a command's sender waits on (`Sreforge-Reply-To`), if any."""
        return self.headers.get(HEADER_REPLY_TO)

    @classmethod
    def from_msg(cls, msg: Msg) -> Delivery:
        """Describe a JetStream message."""
        meta = msg.metadata
        return cls(
            subject=msg.subject,
            data=msg.data,
            headers=dict(msg.headers or {}),
            num_delivered=meta.num_delivered,
            stream_seq=meta.sequence.stream,
        )


Handler = Callable[[T, Delivery], Awaitable[None]]


class Worker(Generic[T]):
    """Consume one durable pull consumer with at most `concurrency` handlers at a time.

    A message is acked only after its handler returns. A handler exception
    naks it with the spec's backoff delay; after `max_deliver` attempts, or at
    once when `parse` rejects it, the raw message goes to the dead-letter
    subject and is terminated, and the worker keeps consuming.

    `held` counts work that outlives its handler (a worker host's stacks): the worker pulls
    only while `concurrency` exceeds both that and the handlers running.

    A body over `max_bytes` (default `MAX_MESSAGE_BYTES`) is dead-lettered before it is
    parsed; `None` leaves the limit to the handler (the correlator answers an oversize
    `run.start` itself). A dead letter never outgrows the server's max payload: when the
    original body would not fit, it is left out and `Sreforge-Body-Dropped` gives its size.

    A message redelivered while its handler still runs here (a stalled loop let its ack
    wait lapse between in-progress acks) is not handled twice: the running handler keeps
    it, and its ack settles the message for every delivery.
    """

    def __init__(
        self,
        bus: Bus,
        spec: ConsumerSpec,
        handler: Handler[T],
        *,
        parse: Callable[[bytes], T],
        concurrency: int = 4,
        max_bytes: int | None = MAX_MESSAGE_BYTES,
        held: Callable[[], int] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency of worker {spec.durable!r} must be >= 1")
        self._bus = bus
        self._spec = spec
        self._handler = handler
        self._parse = parse
        self._concurrency = concurrency
        self._max_bytes = max_bytes
        self._held = held
        self._in_flight: set[asyncio.Task[None]] = set()
        self._handling: set[int] = set()
        self._backlog: deque[Msg] = deque()
        self._feed: PullFeed | None = None
        self._stopping = False
        self._finished = asyncio.Event()
        self._running = False
        self._log = log.bind(durable=spec.durable)

    @property
    def spec(self) -> ConsumerSpec:
        """The consumer this worker serves."""
        return self._spec

    async def run(self) -> None:
        """Consume until `stop()` is called or the connection closes, then finish in-flight work.

        Raises `BusError` if the durable consumer does not exist (run `bootstrap` first).
        """
        if self._stopping:
            return
        self._running = True
        self._finished.clear()
        try:
            await self._check_consumer()
            self._feed = PullFeed(
                self._bus.nc,
                stream=self._spec.stream,
                durable=self._spec.durable,
                capacity=self._concurrency,
                busy=self._busy,
                deliver=self._start,
            )
            if self._stopping:  # stop() came while we were checking the consumer
                self._feed.stop()
            self._bus._register(self)
            await self._serve(self._feed)
        finally:
            self._bus._unregister(self)
            self._running = False
            self._finished.set()

    def _busy(self) -> int:
        handling = len(self._in_flight) + len(self._backlog)
        return handling if self._held is None else max(handling, self._held())

    async def _serve(self, feed: PullFeed) -> None:
        try:
            await feed.run()
        finally:
            self._stopping = True
            await self._release_backlog()
            while self._in_flight:
                await asyncio.gather(*list(self._in_flight), return_exceptions=True)
            await feed.close()

    async def stop(self) -> None:
        """Stop pulling, let in-flight handlers finish, and return once `run()` has ended."""
        self._stopping = True
        if self._feed is not None:
            self._feed.stop()
        if self._running:
            await self._finished.wait()

    def wake(self) -> None:
        """Pull afresh: called on reconnect, since pull requests die with a restarted server."""
        if self._feed is not None:
            self._feed.reset()

    async def _check_consumer(self) -> None:
        try:
            await self._bus.js.consumer_info(self._spec.stream, self._spec.durable)
        except nats.js.errors.NotFoundError as err:
            raise BusError(
                f"durable consumer {self._spec.durable!r} does not exist on stream "
                f"{self._spec.stream}; "
                "run bootstrap() with its ConsumerSpec first"
            ) from err

    def _start(self, msg: Msg) -> None:
        if len(self._in_flight) >= self._concurrency:
            # Only after a reconnect can more arrive than we asked for; keep the bound anyway.
            self._backlog.append(msg)
            return
        task = asyncio.create_task(self._process(msg))
        self._in_flight.add(task)
        task.add_done_callback(self._finish_task)

    def _finish_task(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if self._backlog and not self._stopping:
            self._start(self._backlog.popleft())
        if self._feed is not None:
            self._feed.changed()
        if not task.cancelled() and task.exception() is not None:
            self._log.error("worker task crashed", error=repr(task.exception()))

    async def _release_backlog(self) -> None:
        while self._backlog:
            with contextlib.suppress(nats.errors.Error):
                await self._backlog.popleft().nak()

    async def _process(self, msg: Msg) -> None:
        delivery = Delivery.from_msg(msg)
        if delivery.stream_seq in self._handling:
            # JetStream keys a pending message by its stream sequence: the running
            # handler's in-progress acks and ack cover this delivery too.
            self._log.warning(
                "message redelivered while still handled here; the running handler keeps it",
                subject=delivery.subject,
                run_id=run_of_subject(delivery.subject),
                seq=delivery.stream_seq,
                attempt=delivery.num_delivered,
            )
            return
        self._handling.add(delivery.stream_seq)
        try:
            await self._process_once(msg, delivery)
        finally:
            self._handling.discard(delivery.stream_seq)

    async def _process_once(self, msg: Msg, delivery: Delivery) -> None:
        if delivery.num_delivered > self._spec.max_deliver:
            await self._dead_letter(msg, delivery, "delivery limit reached before handling")
            return
        if self._max_bytes is not None and len(msg.data) > self._max_bytes:
            reason = (
                f"message is {len(msg.data)} bytes, over the limit of {self._max_bytes} bytes "
                "(MAX_MESSAGE_BYTES)"
            )
            await self._dead_letter(msg, delivery, reason)
            return
        try:
            value = self._parse(msg.data)
        except Exception as err:
            await self._dead_letter(msg, delivery, f"unparsable message: {err}")
            return
        if (wrong := misplaced(value, msg.subject)) is not None:
            await self._dead_letter(msg, delivery, wrong)
            return
        if delivery.num_delivered > 1:
            # Loud: a worker stopped (or failed) with this message; its handler runs again.
            self._log.error(
                "message redelivered",
                subject=delivery.subject,
                run_id=run_of_subject(delivery.subject),
                seq=delivery.stream_seq,
                attempt=delivery.num_delivered,
                reason="a previous delivery was not acked (its worker stopped, or failed)",
            )
        keepalive = asyncio.create_task(self._keep_alive(msg))
        try:
            await self._handler(value, delivery)
        except Exception as err:
            await self._handle_failure(msg, delivery, err)
        else:
            await self._ack(msg, delivery)
        finally:
            keepalive.cancel()

    async def _keep_alive(self, msg: Msg) -> None:
        interval = max(self._spec.ack_wait / 3, 0.1)
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(nats.errors.Error):
                await msg.in_progress()

    async def _ack(self, msg: Msg, delivery: Delivery) -> None:
        try:
            await msg.ack_sync()
        except nats.errors.Error as err:
            # The message comes back after ack_wait; handlers stay idempotent via KV claims.
            self._log.warning("ack not confirmed", seq=delivery.stream_seq, error=repr(err))

    async def _handle_failure(self, msg: Msg, delivery: Delivery, err: Exception) -> None:
        attempt = delivery.num_delivered
        if attempt >= self._spec.max_deliver:
            await self._dead_letter(msg, delivery, f"handler failed {attempt} times: {err!r}")
            return
        delay = self._spec.delay_after(attempt)
        self._log.warning(
            "handler failed; redelivering",
            subject=delivery.subject,
            seq=delivery.stream_seq,
            attempt=attempt,
            delay_s=delay,
            exc_info=err,
        )
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=delay)

    async def _dead_letter(self, msg: Msg, delivery: Delivery, reason: str) -> None:
        self._log.error(
            "dead-lettering message",
            subject=delivery.subject,
            seq=delivery.stream_seq,
            attempt=delivery.num_delivered,
            reason=reason,
        )
        if not delivery.subject.startswith(DEADLETTER_PREFIX):
            try:
                headers = self._deadletter_headers(delivery, reason)
                body = self._deadletter_body(msg.data, headers)
                await self._bus.publish_raw(self._spec.deadletter_subject, body, headers)
            except BusError as err:
                self._log.error("dead-letter publish failed; redelivering", error=repr(err))
                with contextlib.suppress(nats.errors.Error):
                    await msg.nak(delay=self._spec.delay_after(delivery.num_delivered))
                return
        with contextlib.suppress(nats.errors.Error):
            await msg.term()

    def _deadletter_body(self, data: bytes, headers: dict[str, str]) -> bytes:
        """The original body, or nothing (noted in `headers`) when it would not fit."""
        room = self._bus.nc.max_payload - wire_size(b"", headers) - 64  # the dropped header
        if len(data) <= min(MAX_MESSAGE_BYTES, room):
            return data
        headers[HEADER_DEADLETTER_BODY_DROPPED] = str(len(data))
        return b""

    def _deadletter_headers(self, delivery: Delivery, reason: str) -> dict[str, str]:
        one_line = " ".join(reason.split())[:_MAX_ERROR_CHARS]
        headers = {
            HEADER_MSG_ID: f"deadletter:{self._spec.durable}:{delivery.stream_seq}",
            HEADER_DEADLETTER_SUBJECT: delivery.subject,
            HEADER_DEADLETTER_ERROR: one_line,
            HEADER_DEADLETTER_NUM_DELIVERED: str(delivery.num_delivered),
            HEADER_DEADLETTER_SEQ: str(delivery.stream_seq),
            HEADER_DEADLETTER_DURABLE: self._spec.durable,
        }
        run_id = run_of_subject(delivery.subject)
        if run_id is not None:
            headers[HEADER_DEADLETTER_RUN_ID] = run_id
        return headers


def misplaced(value: object, subject: str) -> str | None:
    """Why an event does not belong on the run or trigger `subject` it came on, else None.

    Subject permissions say who may publish on `sreforge.run.*.Scored`; they say nothing
    about the body. A body whose own type or run names another subject (a `Scored` sent
    on the runner's `Submitted` subject) would slip past them, so it is refused here.
    """
    if not isinstance(value, Event) or not _EVENT_SUBJECT.match(subject):
        return None
    try:
        expected = value.subject
    except NotImplementedError:
        return f"event {value.type} has no subject of its own but came on {subject!r}"
    if expected == subject:
        return None
    return f"event {value.type} belongs on {expected!r}, not on {subject!r}"


def run_of_subject(subject: str) -> str | None:
    """The run id a run-scoped subject (`sreforge.run.<run_id>.<Type>`) names, else None."""
    parts = subject.split(".")
    if len(parts) < 4 or parts[:2] != ["sreforge", "run"] or not _RUN_ID.fullmatch(parts[2]):
        return None
    return parts[2]
