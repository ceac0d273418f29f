"""Shared pytest fixtures: a real, pinned `nats-server` per test and a bootstrapped bus."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sreforge_bus import Bus, bootstrap, connect
from sreforge_bus.embedded import NatsServer, start_nats_server

# Whole-run machinery shared by tests/e2e and tests/integrity (`import wholerun`).
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests" / "support"))


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A fresh JetStream `nats-server` on a free loopback port with a temporary store.

    Stopped (process group killed) and its directory deleted after the test.
    """
    with start_nats_server() as server:
        yield server


@pytest.fixture
async def bus(nats_server: NatsServer) -> AsyncIterator[Bus]:
    """A `Bus` connected to `nats_server`, with the stream and run store bootstrapped."""
    connected = await connect(nats_server.url, name="pytest")
    try:
        await bootstrap(connected)
        yield connected
    finally:
        await connected.close()
