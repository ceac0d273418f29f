"""Bootstrapping is safe to run from several processes at once."""

from __future__ import annotations

import asyncio

import pytest
from sreforge_bus import (
    WORK_DURABLE,
    WORK_SOURCE_SUBJECT,
    WORK_STREAM,
    ConsumerSpec,
    bootstrap,
    connect,
)
from sreforge_bus.embedded import NatsServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(60)
async def test_worker_hosts_bootstrapping_at_once_all_make_or_find_the_work_queue(
    nats_server: NatsServer,
) -> None:
    """Eight hosts bootstrap a fresh server at once; every one succeeds and one work queue
    stands. Each asks for the queue with its own source start time, so a host that loses
    the race to make it meets "name already in use with a different configuration"
    (CI saw a second worker host die of it) and must take the made one instead."""
    work = ConsumerSpec(WORK_DURABLE, (WORK_SOURCE_SUBJECT,))
    buses = [await connect(nats_server.url, name=f"host-{n}") for n in range(8)]
    try:
        results = await asyncio.gather(
            *(bootstrap(bus, [work]) for bus in buses), return_exceptions=True
        )
        assert [r for r in results if r is not None] == []
        info = await buses[0].js.stream_info(WORK_STREAM)
        assert [s.filter_subject for s in info.config.sources or []] == [WORK_SOURCE_SUBJECT]
        consumer = await buses[0].js.consumer_info(WORK_STREAM, WORK_DURABLE)
        assert consumer.config.durable_name == WORK_DURABLE
    finally:
        for bus in buses:
            await bus.close()
