"""The campaign loop against a fake engine on a real nats-server: admission, Ctrl-C that
lets started runs end with their records, and a resume that runs only the rest.

The fake engine answers `run.start` and ends each run (Scored, Recorded, CleanedUp) only
when the test releases it, so what is in flight at any moment is under the test's control.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
from pathlib import Path

import pytest
from fakeengine import FakeEngine, fake_engine

from sreforge._settings import EngineSettings
from sreforge.campaign._runner import run_campaign
from sreforge.campaign._spec import parse_spec
from sreforge.campaign._store import CampaignStore, finished_keys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

__all__ = ["fake_engine"]  # the fixture, imported for pytest

SPEC = parse_spec(
    'scenarios = ["latency-cache-stampede"]\nagents = ["reference", "noop"]\n'
    "trials = 3\ntime_scale = 0.1\nconcurrency = 2\nreserve_memory_mb = 0\n",
    "c.toml",
)


async def _until(what: str, check: object, limit_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    assert callable(check)
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_ctrl_c_drains_started_runs_and_a_resume_runs_only_the_rest(
    fake_engine: FakeEngine, tmp_path: Path
) -> None:
    """At most `concurrency` runs in flight; Ctrl-C starts no new run but writes the lines
    of the runs in flight once they end; the resume runs the two trials left, and the
    campaign ends with one line per trial (6), no trial run twice."""
    store = CampaignStore(tmp_path / "campaigns", "20261201-190000-abcdef")
    store.create(SPEC)
    stream = io.StringIO()
    first = asyncio.create_task(run_campaign(EngineSettings(), store, SPEC, stream))
    await _until("two runs in flight", lambda: len(fake_engine.started) == 2)
    await asyncio.sleep(0.3)
    assert len(fake_engine.started) == 2, "a third run was admitted past the concurrency"
    await fake_engine.release()
    await _until("two more runs", lambda: len(fake_engine.started) == 4)
    os.kill(os.getpid(), signal.SIGINT)
    await _until("the stop notice", lambda: "stopping: no new runs" in stream.getvalue())
    await fake_engine.release()
    end = await asyncio.wait_for(first, 30)
    assert (end.interrupted, end.pending, end.errors) == (True, 2, 0)
    assert len(fake_engine.started) == 4, "a run was started after Ctrl-C"
    assert len(store.results()) == 4
    drained = "4/6 done, 0 running, 2 left for a resume; passed reference 2/2, noop 0/2"
    assert drained in stream.getvalue()

    async def release_as_started() -> None:
        while len(fake_engine.ended) < 6:
            await fake_engine.release()
            await asyncio.sleep(0.05)

    releaser = asyncio.create_task(release_as_started())
    end = await asyncio.wait_for(run_campaign(EngineSettings(), store, SPEC, io.StringIO()), 30)
    await asyncio.wait_for(releaser, 10)
    assert (end.interrupted, end.pending) == (False, 0)
    results = store.results()
    assert len(results) == 6
    assert len(finished_keys(results)) == 6
    assert len({r.run_id for r in results}) == 6
    assert fake_engine.most_in_flight <= 2
    by_agent = {(r.agent, r.verdict) for r in results}
    assert by_agent == {("reference", "passed"), ("noop", "failed")}
    assert {r.time_to_clear_s for r in results if r.agent == "reference"} == {3.0}
    assert (store.path / "summary.json").is_file()
    assert (store.path / "summary.csv").is_file()


async def test_a_second_ctrl_c_leaves_at_once_and_writes_no_unfinished_trial(
    fake_engine: FakeEngine, tmp_path: Path
) -> None:
    """Twice Ctrl-C with two runs in flight: the campaign returns without their lines (no
    record reached it), so both trials are still pending for a resume."""
    store = CampaignStore(tmp_path / "campaigns", "20261201-190000-fedcba")
    store.create(SPEC)
    stream = io.StringIO()
    task = asyncio.create_task(run_campaign(EngineSettings(), store, SPEC, stream))
    await _until("two runs in flight", lambda: len(fake_engine.started) == 2)
    os.kill(os.getpid(), signal.SIGINT)
    await _until("the stop notice", lambda: "stopping: no new runs" in stream.getvalue())
    os.kill(os.getpid(), signal.SIGINT)
    end = await asyncio.wait_for(task, 20)
    assert end.interrupted
    assert end.pending == 6
    assert store.results() == []
    assert "stopping now" in stream.getvalue()


async def test_a_trial_whose_follow_fails_is_an_error_line_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Following one run raising (a bug, a lost connection) gives that trial an `error`
    line naming it, so the campaign carries on with the others and a resume retries it."""
    from sreforge._engine import RunningEngine
    from sreforge._run_cli import Trial
    from sreforge._run_view import Progress
    from sreforge.campaign._runner import _one
    from sreforge.campaign._store import TrialKey

    async def broken(self: Trial, engine: RunningEngine) -> None:
        raise RuntimeError("connection lost")

    monkeypatch.setattr(Trial, "run", broken)
    trial = Trial("latency-cache-stampede", "noop", 0.1, Progress(io.StringIO()))
    result = await _one(RunningEngine(bus=None), trial, TrialKey("noop", "s", 1))  # type: ignore[arg-type]
    assert result.verdict == "error"
    assert result.reason is not None
    assert "following the run failed: RuntimeError('connection lost')" in result.reason
