"""The one place that creates or updates the stream, the KV bucket and durable consumers."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamSource,
)

from sreforge_bus._connection import Bus
from sreforge_bus._errors import BootstrapError
from sreforge_bus._names import (
    DUPLICATE_WINDOW_S,
    RUNS_BUCKET,
    STREAM,
    STREAM_SUBJECTS,
    WORK_SOURCE_SUBJECT,
    WORK_STREAM,
    deadletter_subject,
    stream_of,
)

__all__ = ["ConsumerSpec", "bootstrap"]

_DURABLE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_AGE_S = 7 * 24 * 3600.0
_RUNS_HISTORY = 16
_ATTEMPTS = 4
_STREAM_NAME_IN_USE = 10058
"""JetStream's error code for a stream made already with another configuration."""


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """A durable pull consumer on stream `SREFORGE` and its redelivery policy.

    A failed handler is redelivered after `backoff[n - 1]` seconds on delivery
    `n` (the last value repeats); after `max_deliver` failed attempts the message
    goes to `sreforge.deadletter.<durable>`. `ack_wait` is the time an unacked
    message stays with one worker; the worker extends it while a handler runs
    (`in_progress()` every `ack_wait / 3`, from the event loop, also while the handler
    blocks in a thread), so it bounds only how soon a dead worker's message comes back:
    5 s. A loop stalled past two thirds of it (a loaded machine) can cause a spurious
    redelivery to a live process; every handler is idempotent (claims), and the
    deployer and runner wait out a duplicate of a stage they have in flight.
    """

    durable: str
    filter_subjects: tuple[str, ...]
    max_deliver: int = 5
    backoff: tuple[float, ...] = (0.5, 2, 5)
    ack_wait: float = 5
    deliver_new: bool = False
    """Start from messages stored after the consumer was created (a worker host's own
    durable: the runs it may own are all requested after it started), not the first."""

    def __post_init__(self) -> None:
        if not _DURABLE.match(self.durable):
            raise ValueError(f"durable {self.durable!r} must match {_DURABLE.pattern}")
        if not self.filter_subjects or any(not s.strip() for s in self.filter_subjects):
            raise ValueError(f"filter_subjects of {self.durable!r} must be non-empty subjects")
        if self.max_deliver < 1:
            raise ValueError(f"max_deliver of {self.durable!r} must be >= 1")
        if any(delay < 0 for delay in self.backoff):
            raise ValueError(f"backoff of {self.durable!r} must hold non-negative seconds")
        if self.ack_wait <= 0:
            raise ValueError(f"ack_wait of {self.durable!r} must be positive")

    @property
    def stream(self) -> str:
        """The stream this consumer reads (`SREFORGE`, or the work queue's)."""
        return stream_of(self.durable)

    @property
    def deadletter_subject(self) -> str:
        """Where this consumer's poison messages are published."""
        return deadletter_subject(self.durable)

    def delay_after(self, num_delivered: int) -> float:
        """Return the redelivery delay after failed delivery number `num_delivered` (1-based)."""
        if not self.backoff:
            return 1.0
        return float(self.backoff[min(num_delivered, len(self.backoff)) - 1])

    def consumer_config(self) -> ConsumerConfig:
        """Return the server-side configuration of this durable consumer."""
        single = len(self.filter_subjects) == 1
        return ConsumerConfig(
            name=self.durable,
            durable_name=self.durable,
            deliver_policy=DeliverPolicy.NEW if self.deliver_new else DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            # One extra delivery beyond the handler's budget lets a worker
            # dead-letter a message whose earlier attempts crashed without a nak.
            max_deliver=self.max_deliver + 1,
            filter_subject=self.filter_subjects[0] if single else None,
            filter_subjects=None if single else list(self.filter_subjects),
            max_ack_pending=1000,
        )


def _stream_config(replicas: int) -> StreamConfig:
    return StreamConfig(
        name=STREAM,
        subjects=list(STREAM_SUBJECTS),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_age=_MAX_AGE_S,
        duplicate_window=DUPLICATE_WINDOW_S,
        num_replicas=replicas,
    )


def _work_config(replicas: int, since: datetime) -> StreamConfig:
    """The work queue: every RunRequested stored in `SREFORGE` from `since` on, kept until
    a worker host acks it (then gone: WorkQueue retention)."""
    return StreamConfig(
        name=WORK_STREAM,
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_age=_MAX_AGE_S,
        num_replicas=replicas,
        sources=[
            StreamSource(name=STREAM, filter_subject=WORK_SOURCE_SUBJECT, opt_start_time=since)
        ],
    )


async def _ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    try:
        found = await js.stream_info(config.name or "")
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(config)
            return
        except nats.js.errors.BadRequestError as err:
            # Another process made it between our look and our add (two worker hosts
            # starting at once make the work queue with different source start times).
            if err.err_code != _STREAM_NAME_IN_USE:
                raise
        found = await js.stream_info(config.name or "")
    if config.sources:  # a source's start is fixed when the stream is made
        config.sources = found.config.sources
    await js.update_stream(config)


async def _retrying(step: Callable[[], Awaitable[None]]) -> None:
    """Run an idempotent step again when the server did not answer in time: two processes
    bootstrapping one cluster at once make proposals that collide, and both time out;
    a later attempt finds the work done, or does it."""
    for attempt in range(_ATTEMPTS):
        try:
            await step()
            return
        except TimeoutError:
            if attempt == _ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.5 * (attempt + 1))


async def _ensure_runs_bucket(js: JetStreamContext, replicas: int) -> None:
    """The run store; its entries age out with the events (`_MAX_AGE_S` after their last
    write), so finished runs' states and claims do not pile up forever."""
    try:
        await js.key_value(RUNS_BUCKET)
    except nats.js.errors.BucketNotFoundError:
        await js.create_key_value(
            bucket=RUNS_BUCKET,
            history=_RUNS_HISTORY,
            storage=StorageType.FILE,
            ttl=_MAX_AGE_S,
            replicas=replicas,
        )
        return
    backing = f"KV_{RUNS_BUCKET}"
    config = (await js.stream_info(backing)).config
    # A bucket made before it had an age limit, or on fewer nodes.
    if config.max_age != _MAX_AGE_S or (config.num_replicas or 1) != replicas:
        config.max_age = _MAX_AGE_S
        config.num_replicas = replicas
        await js.update_stream(config)


def _consumer_step(js: JetStreamContext, spec: ConsumerSpec) -> Callable[[], Awaitable[None]]:
    async def add() -> None:
        await js.add_consumer(spec.stream, config=spec.consumer_config())

    return add


async def bootstrap(bus: Bus, consumers: Sequence[ConsumerSpec] = (), *, replicas: int = 1) -> None:
    """Create or update stream `SREFORGE`, KV bucket `sreforge-runs` and `consumers`.

    Idempotent: running it again with the same specs changes nothing, and with
    changed specs updates the consumers in place (services only bind to them). A
    consumer of the work queue (`workers-runs`) also makes stream `SREFORGE_WORK`.
    `replicas` (1, or 3 on a 3-node cluster) is how many nodes keep each stream.
    """
    js = bus.js
    step = f"stream {STREAM}"
    try:
        await _retrying(lambda: _ensure_stream(js, _stream_config(replicas)))
        step = f"KV bucket {RUNS_BUCKET}"
        await _retrying(lambda: _ensure_runs_bucket(js, replicas))
        if any(spec.stream == WORK_STREAM for spec in consumers):
            step = f"stream {WORK_STREAM}"
            work = lambda: _ensure_stream(js, _work_config(replicas, datetime.now(UTC)))  # noqa: E731
            await _retrying(work)
        for spec in consumers:
            step = f"consumer {spec.durable}"
            await _retrying(_consumer_step(js, spec))
    except (nats.errors.Error, TimeoutError) as err:
        raise BootstrapError(f"bootstrap of {step} failed: {err!r}") from err
