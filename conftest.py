"""Shared pytest fixtures: a real, pinned `nats-server` per test and a bootstrapped bus; a
Docker engine with what the compose topology's stack image is built from."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sreforge_bus import Bus, bootstrap, connect
from sreforge_bus.embedded import NatsServer, start_nats_server

CHECKOUT = Path(__file__).resolve().parent
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


def _answers(*command: str) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def stack_image_inputs() -> Iterator[None]:
    """A Docker engine with Compose and `local/bookworm`, and the lockfile's wheels in
    `.sreforge/compose/wheels` (what the compose topology builds its stack image from).

    What is missing is made by `scripts/docker-engine` and `scripts/compose-context
    --images-only`; a dockerd started here is stopped afterwards (that one, by its PID).
    Skipped, visibly, where no engine can start.
    """
    ready = _answers("docker", "compose", "version") and _answers(
        "docker", "image", "inspect", "local/bookworm"
    )
    marker = CHECKOUT / ".sreforge" / "dockerd.pid"
    started_here = False
    if not ready:
        started_here = not marker.exists() and not _answers("docker", "info")
        engine = subprocess.run(
            [CHECKOUT / "scripts" / "docker-engine", "start"], capture_output=True, text=True
        )
        if engine.returncode != 0 or not _answers("docker", "info"):
            pytest.skip(f"no Docker engine could start here: {engine.stderr.strip()[-300:]}")
    if not any((CHECKOUT / ".sreforge" / "compose" / "wheels").glob("*.whl")):
        script = CHECKOUT / "scripts" / "compose-context"
        subprocess.run([script, "--images-only"], check=True, capture_output=True, timeout=300)
    try:
        yield
    finally:
        if started_here:
            subprocess.run([CHECKOUT / "scripts" / "docker-engine", "stop"], check=False)
