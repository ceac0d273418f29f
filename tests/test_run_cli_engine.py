"""`sreforge run` against real engines: the embedded one it starts, and one already running."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sreforge_bus import Bus, bootstrap, follow
from sreforge_bus.embedded import NatsServer
from sreforge_contracts import (
    CleanedUp,
    FaultArmed,
    Recorded,
    RunFailed,
    RunRequested,
    StackReady,
    parse_event,
    utcnow,
)
from sreforge_correlator import CorrelatorService, CorrelatorSettings
from sreforge_recorder import RecorderSettings, recorder_service

from sreforge import _run_follow as run_follow
from sreforge._engine import RunningEngine
from sreforge._run_follow import Follower
from sreforge._run_view import EXIT_ERROR, Progress

pytestmark = pytest.mark.integration

# The `run` verb as the CLI registers it, without depending on how cli.py wires it in.
DRIVER = """
import argparse, sys
from sreforge._run_cli import add_run_command
parser = argparse.ArgumentParser(prog="sreforge")
add_run_command(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.handler(args))
"""


def _env(tmp_path: Path, nats_url: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "SREFORGE_HOME": str(tmp_path / "home"),
        "SREFORGE_TRIGGER_PORT": "0",
        "SREFORGE_TRIGGER_TOKEN": "test-token",
        "SREFORGE_RECORDER_RUNS_DIR": str(tmp_path / "runs"),
        "SREFORGE_RECORDER_BANK": "false",
    }
    env.pop("SREFORGE_NATS_URL", None)
    if nats_url is not None:
        env["SREFORGE_NATS_URL"] = nats_url
    return env


def test_a_rejected_run_on_the_embedded_engine_prints_why_and_exits_1(tmp_path: Path) -> None:
    """No engine up: `run` starts its own, the unknown scenario is refused, exit code 1."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "run", "no-such-scenario", "--agent", "noop", "--json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 1, done.stderr
    [line] = done.stdout.splitlines()
    outcome = json.loads(line)
    assert outcome["verdict"] == "rejected"
    assert "scenario: no scenario 'no-such-scenario'" in outcome["reason"]
    assert "starting the embedded engine" in done.stderr
    assert "rejected" in done.stderr
    assert outcome["record"] is not None, "the rejection is recorded too"
    assert Path(outcome["record"]).is_file()


@pytest.fixture
async def engine(bus: Bus, tmp_path: Path) -> AsyncIterator[Bus]:
    """A running engine of two real services: the correlator and the recorder."""
    correlator = CorrelatorService(settings=CorrelatorSettings(sweep_interval_seconds=0.05))
    recorder = recorder_service(RecorderSettings(runs_dir=tmp_path / "runs", bank=False))
    services = [correlator, recorder]
    await bootstrap(bus, [route.consumer for service in services for route in service.routes])
    stop = asyncio.Event()
    tasks = [asyncio.create_task(service.run(bus, stop)) for service in services]
    try:
        yield bus
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)


async def _act_as_deployer(bus: Bus) -> None:
    """Boot nothing, but report the stack ready and the fault armed for the first run."""
    async for message in follow(bus, "sreforge.run.*.RunRequested"):
        requested = parse_event(message.data)
        assert isinstance(requested, RunRequested)
        run_id = requested.run_id
        break
    ready = StackReady(
        run_id=run_id,
        producer="deployer",
        stack="bookshelf-flask",
        run_dir="/nonexistent",
        agent_endpoints={},
        operator_endpoints={},
    )
    await bus.publish(ready)
    now = utcnow()
    await bus.publish(
        FaultArmed(run_id=run_id, producer="deployer", armed_at=now, delivery_mode="setup-baked")
    )


@pytest.mark.timeout(90)
async def test_a_run_on_a_running_engine_shows_its_phases_and_exits_3_when_aborted(
    engine: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    """With SREFORGE_NATS_URL set, `run` only submits and follows; no alert → aborted, exit 3."""
    deployer = asyncio.create_task(_act_as_deployer(engine))
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DRIVER, "run", "latency-cache-stampede", "--agent", "noop",
        "--time-scale", "0.001",
        env=_env(tmp_path, nats_server.url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(child.communicate(), 60)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await asyncio.wait_for(deployer, 10)
    stdout, stderr = out.decode(), err.decode()
    assert child.returncode == 3, stderr
    assert "embedded engine" not in stderr
    phases = [line.split()[1] for line in stderr.splitlines() if line.strip()[:1].isdigit()]
    assert phases[:3] == ["requested", "stack", "armed"]
    assert phases[-2:] == ["failed", "recorded"]
    assert "verdict: aborted" in stdout
    assert "confirm-fire" in stdout
    record_line = next(line for line in stdout.splitlines() if line.startswith("record:"))
    assert await asyncio.to_thread(Path(record_line.split(maxsplit=1)[1]).is_file)


async def test_a_run_with_no_verdict_gives_up_at_its_deadline(bus: Bus) -> None:
    """Nothing answers for the run: an error outcome (exit 4) naming the last phase, no hang."""
    follower = Follower(RunningEngine(bus), "silent-run-1", Progress(io.StringIO()), 0.3)
    outcome = await asyncio.wait_for(follower.run(), 10)
    assert outcome.exit_code == EXIT_ERROR
    assert outcome.reason is not None
    assert "no verdict before the deadline (last phase: submitting)" in outcome.reason


async def test_a_crashed_embedded_service_ends_the_run_as_an_error(bus: Bus) -> None:
    """A service task that died is reported at once instead of waiting for the deadline."""

    async def crash() -> None:
        raise RuntimeError("boom")

    engine = RunningEngine(bus, tasks={"oracle": asyncio.create_task(crash())})
    follower = Follower(engine, "crashed-run-1", Progress(io.StringIO()), 60)
    outcome = await asyncio.wait_for(follower.run(), 10)
    assert outcome.exit_code == EXIT_ERROR
    assert outcome.reason == "service oracle stopped: RuntimeError('boom')"


@pytest.mark.timeout(30)
async def test_a_record_that_comes_long_after_the_verdict_is_still_reported(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder that restarts writes the record well past the grace period after the
    verdict: the CLI keeps following the run until its deadline and reports the record."""
    monkeypatch.setattr(run_follow, "RECORD_GRACE_S", 0.2)
    run_id = "late-record-1"
    follower = Follower(RunningEngine(bus), run_id, Progress(io.StringIO()), 20)
    following = asyncio.create_task(follower.run())
    failed = RunFailed(
        run_id=run_id, producer="correlator", stage="confirm-fire", reason="no alert",
        verdict="aborted",
    )  # fmt: skip
    await bus.publish(failed)
    deadline = asyncio.get_running_loop().time() + 10
    while follower._verdict is None:  # the follower has taken the verdict
        assert asyncio.get_running_loop().time() < deadline, "the verdict never reached the CLI"
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # the recorder is down: five grace periods pass
    assert not following.done(), "the CLI gave up on the record"
    recorded = Recorded(
        run_id=run_id, producer="recorder", path="/runs/late-record-1/record.json",
        sha256="0" * 64, verdict="aborted",
    )  # fmt: skip
    await bus.publish(recorded)
    await bus.publish(CleanedUp(run_id=run_id, producer="deployer", verified=True, leftovers=[]))
    outcome = await asyncio.wait_for(following, 10)
    assert outcome.verdict == "aborted"
    assert outcome.record == "/runs/late-record-1/record.json"


@pytest.mark.timeout(30)
async def test_a_follow_cut_short_is_taken_up_again_without_repeating_events(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's follow breaks with a timeout after its first event (a cluster node lost
    meanwhile): the CLI follows again, skips what it read, and still reports the record."""
    run_id = "cut-follow-1"
    calls = 0

    async def flaky_follow(bus: Bus, subject: str) -> AsyncIterator[object]:
        nonlocal calls
        calls += 1
        async for message in follow(bus, subject):
            yield message
            if calls == 1:
                raise TimeoutError  # what nats-py raised when a consumer's creation timed out

    monkeypatch.setattr(run_follow, "follow", flaky_follow)
    for event in (
        RunFailed(run_id=run_id, producer="correlator", stage="confirm-fire",
                  reason="no alert", verdict="aborted"),
        Recorded(run_id=run_id, producer="recorder", path="/runs/cut-follow-1/record.json",
                 sha256="0" * 64, verdict="aborted"),
        CleanedUp(run_id=run_id, producer="deployer", verified=True, leftovers=[]),
    ):  # fmt: skip
        await bus.publish(event)
    taken: list[str] = []
    follower = Follower(RunningEngine(bus), run_id, Progress(io.StringIO()), 20)
    real_take = follower._take
    monkeypatch.setattr(follower, "_take", lambda s, d: (taken.append(s), real_take(s, d)))
    outcome = await asyncio.wait_for(follower.run(), 20)
    assert calls == 2
    assert outcome.verdict == "aborted"
    assert outcome.record == "/runs/cut-follow-1/record.json"
    assert len(taken) == len(set(taken)) == 3, taken
