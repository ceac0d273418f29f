"""How `sreforge run` follows a run on its own engine: a lost follow, an interrupt, a
deadline; each still ends with the run's one record."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sreforge_bus import Bus, follow
from sreforge_contracts import CleanedUp, Recorded, RunFailed, parse_event

from sreforge import _run_follow as run_follow
from sreforge._engine import RunningEngine
from sreforge._run_follow import Follower, Interrupt, record_path
from sreforge._run_view import Progress

pytestmark = pytest.mark.integration


class _BrokenFollow:
    """A follow that never gets going (the engine too busy to create its consumer)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, bus: Bus, subject: str) -> AsyncIterator[object]:
        self.calls += 1
        raise TimeoutError
        yield  # an async generator, as `follow` is


async def _first_failure(bus: Bus, run_id: str) -> RunFailed:
    async for message in follow(bus, f"sreforge.run.{run_id}.RunFailed"):
        failed = parse_event(message.data)
        assert isinstance(failed, RunFailed)
        return failed
    raise AssertionError("the follow ended")


async def _record_the_run(bus: Bus, run_id: str, path: str, verdict: str) -> None:
    await bus.publish(
        Recorded(run_id=run_id, producer="recorder", path=path, sha256="0" * 64, verdict=verdict)
    )
    await bus.publish(CleanedUp(run_id=run_id, producer="deployer", verified=True, leftovers=[]))


@pytest.mark.timeout(30)
async def test_a_follow_lost_for_good_still_finds_the_record_on_disk(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follow fails every time (more than the old four retries): the CLI keeps its
    engine up and reports the record the recorder wrote meanwhile, not `error`."""
    broken = _BrokenFollow()
    monkeypatch.setattr(run_follow, "follow", broken)
    monkeypatch.setattr(run_follow, "FOLLOW_BACKOFF_S", (0.05,))
    run_id = "lost-follow-1"
    engine = RunningEngine(bus, records_dir=tmp_path)
    progress = Progress(io.StringIO())
    following = asyncio.create_task(Follower(engine, run_id, progress, 20).run())
    deadline = asyncio.get_running_loop().time() + 10
    while broken.calls <= 2 * len(run_follow.FOLLOW_BACKOFF_S) + 5:  # past the old 4 retries
        assert asyncio.get_running_loop().time() < deadline, "the CLI stopped following again"
        assert not following.done(), f"the CLI gave up on a lost follow: {following.result()}"
        await asyncio.sleep(0.05)
    record = record_path(tmp_path, run_id)
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"run_id": run_id, "verdict": "failed"}))
    outcome = await asyncio.wait_for(following, 10)
    assert (outcome.verdict, outcome.record) == ("failed", str(record.resolve()))


@pytest.mark.timeout(30)
async def test_an_interrupt_ends_the_run_aborted_and_waits_for_its_record(bus: Bus) -> None:
    """SIGINT or SIGTERM on the embedded engine: the run is failed `aborted` through the
    bus (stage `interrupted`, naming the signal) and the CLI reports its record."""
    run_id = "interrupted-1"
    engine = RunningEngine(bus, buses={"correlator": bus})
    interrupt = Interrupt()
    interrupt.signal_name = "SIGTERM"
    interrupt.asked.set()
    failure = asyncio.create_task(_first_failure(bus, run_id))
    following = asyncio.create_task(
        Follower(engine, run_id, Progress(io.StringIO()), 600, interrupt).run()
    )
    failed = await asyncio.wait_for(failure, 10)
    assert (failed.stage, failed.verdict) == ("interrupted", "aborted")
    assert "SIGTERM" in failed.reason
    await _record_the_run(bus, run_id, "/runs/interrupted-1/record.json", "aborted")
    outcome = await asyncio.wait_for(following, 10)
    assert (outcome.verdict, outcome.record) == ("aborted", "/runs/interrupted-1/record.json")
    assert outcome.reason is not None
    assert outcome.reason.startswith("interrupted: ")


@pytest.mark.timeout(30)
async def test_a_run_past_its_deadline_on_the_embedded_engine_still_gets_its_record(
    bus: Bus,
) -> None:
    """No verdict by the deadline: the engine's own run is ended `error` (stage
    `deadline`) and its record reported, instead of the engine going down without one."""
    run_id = "overdue-1"
    engine = RunningEngine(bus, buses={"correlator": bus})
    failure = asyncio.create_task(_first_failure(bus, run_id))
    following = asyncio.create_task(Follower(engine, run_id, Progress(io.StringIO()), 0.3).run())
    failed = await asyncio.wait_for(failure, 10)
    assert (failed.stage, failed.verdict) == ("deadline", "error")
    assert "last phase: submitting" in failed.reason
    await _record_the_run(bus, run_id, "/runs/overdue-1/record.json", "error")
    outcome = await asyncio.wait_for(following, 10)
    assert (outcome.verdict, outcome.record) == ("error", "/runs/overdue-1/record.json")


async def test_an_engine_elsewhere_is_left_to_finish_its_run(bus: Bus) -> None:
    """Joined to a running engine, the CLI has no correlator of its own: it ends no run."""
    assert not await RunningEngine(bus).end_run("elsewhere-1", "interrupted", "x", "aborted")


@pytest.mark.timeout(30)
async def test_a_stop_delivered_twice_at_once_is_one_stop_and_a_later_one_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`timeout` signals the CLI and then its whole group: those two SIGTERMs are one stop
    (the run still ends with its record); a signal after `REPEAT_S` leaves at once."""
    interrupt = Interrupt()
    waiting = asyncio.create_task(asyncio.Event().wait())
    with interrupt.installed(waiting):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(interrupt.asked.wait(), 5)
        await asyncio.sleep(0.2)  # the second handler call has run (loop-delivered signals)
        assert not waiting.done(), "a doubly delivered stop left without the record"
        assert interrupt.signal_name == "SIGTERM"
        monkeypatch.setattr(run_follow, "REPEAT_S", 0.0)
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 5)
