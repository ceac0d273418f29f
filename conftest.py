"""Shared pytest fixtures: a real, pinned `nats-server` per test and a bootstrapped bus; a
Docker engine with what the compose topology's stack image is built from; the structured
log events a test caused, however logging was configured. Hooks: the
whole-run tests go last and their runs start first, in the background (`wholerun`); one
deployer cache for the session's every run (`RUN_CACHE`: seed snapshots, learned CI base
reports), as one operator's engine home keeps it, never the machine user's own home."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from sreforge_bus import Bus, bootstrap, connect
from sreforge_bus.embedded import NatsServer, start_nats_server

# Whole-run machinery shared by tests/e2e and tests/integrity (`import wholerun`).
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests" / "support"))
import wholerun


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


LogEvents = Callable[[], list[dict[str, Any]]]


@pytest.fixture
def log_events(caplog: pytest.LogCaptureFixture) -> Iterator[LogEvents]:
    """The structured log events emitted so far in the test (each with `log_level`).

    `structlog.testing.capture_logs` alone misses a module's logger that an earlier test
    made real (`configure_logging` caches loggers on first use, routed to stdlib logging):
    those events arrive through `caplog` as the event dicts themselves.
    """
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as captured:

        def events() -> list[dict[str, Any]]:
            found = [dict(entry) for entry in captured]
            for record in caplog.records:
                if isinstance(record.msg, dict):
                    entry = dict(record.msg)
                    entry.setdefault("log_level", record.levelname.lower())
                    found.append(entry)
            return found

        yield events


@pytest.fixture(scope="session")
def stack_image_inputs() -> None:
    """The compose topology's stack image inputs (`stack_image_inputs_ready`); skipped,
    visibly, where no engine can start."""
    reason = wholerun.stack_image_inputs_ready()
    if reason is not None:
        pytest.skip(reason)


_MADE_CACHE: list[str] = []


def pytest_configure() -> None:
    """The session's deployer cache folder, for in-process stacks and whole runs alike
    (one the operator set is used as it is, and kept)."""
    if wholerun.RUN_CACHE not in os.environ:
        _MADE_CACHE.append(tempfile.mkdtemp(prefix="run-cache-"))
        os.environ[wholerun.RUN_CACHE] = _MADE_CACHE[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole-run tests last: their runs work in the background meanwhile (`wholerun`)."""
    items[:] = wholerun.ordered(items)


def pytest_runtestloop(session: pytest.Session) -> None:
    """Start the selected whole-run tests' runs before the first test (not on --collect-only)."""
    if not session.config.option.collectonly:
        wholerun.start_runs(session.items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """More whole runs at once when only whole-run tests are left (`wholerun.entering`)."""
    wholerun.entering(item)


def pytest_sessionfinish() -> None:
    """Kill whole runs still going; stop a dockerd this session started."""
    wholerun.close_session()
    wholerun.stop_engine_started_here()
    for made in _MADE_CACHE:
        shutil.rmtree(made, ignore_errors=True)
