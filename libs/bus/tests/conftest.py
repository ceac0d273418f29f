"""Fixtures for the bus kit's tests: a small test event and a worker launcher."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import pytest
from sreforge_bus import Bus, ConsumerSpec, Delivery, Worker
from sreforge_contracts import MAX_MESSAGE_BYTES, Event


class Ping(Event):
    """A small run-scoped event used only by these tests."""

    type: Literal["test.ping"] = "test.ping"
    n: int


MakePing = Callable[..., Ping]
StartWorker = Callable[..., Worker[Any]]


@pytest.fixture
def make_ping() -> MakePing:
    """Build a `Ping` with a deterministic event id: `make_ping(n, run_id="r1")`."""

    def make(n: int, run_id: str = "r1") -> Ping:
        return Ping(event_id=f"{run_id}.ping.{n}", run_id=run_id, producer="tests", n=n)

    return make


@pytest.fixture
async def start_worker(bus: Bus) -> AsyncIterator[StartWorker]:
    """Start `Worker`s (parsing `Ping` by default) that are stopped after the test.

    A worker loop that crashed fails the test at teardown.
    """
    running: list[tuple[Worker[Any], asyncio.Task[None]]] = []

    def start(
        spec: ConsumerSpec,
        handler: Callable[[Any, Delivery], Awaitable[None]],
        *,
        parse: Callable[[bytes], Any] = Ping.model_validate_json,
        concurrency: int = 4,
        max_bytes: int | None = MAX_MESSAGE_BYTES,
    ) -> Worker[Any]:
        worker = Worker(
            bus, spec, handler, parse=parse, concurrency=concurrency, max_bytes=max_bytes
        )
        running.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, task in running:
        await asyncio.wait_for(worker.stop(), 10)
        await task
