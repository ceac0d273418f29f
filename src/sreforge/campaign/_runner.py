"""Running a campaign: admit trials, submit each through `sreforge run`'s path, bank results.

Each trial is `sreforge run`'s `Trial` (`run.start`, then the run's events until its
record) on one engine: the running one, else the embedded engine for the campaign's
duration. The first Ctrl-C stops admitting: every run already started is waited for
until its record (its line is written as usual); a second Ctrl-C leaves at once, and
the trials still running are not written, so a resume runs them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from sreforge._engine import RunningEngine
from sreforge._run_cli import Trial, engine_session
from sreforge._run_view import Outcome, Progress
from sreforge._settings import EngineSettings
from sreforge.campaign._admission import Admission, available_memory_mb
from sreforge.campaign._outcome import lost_its_host, result_of
from sreforge.campaign._show import format_progress, groups_of, summary
from sreforge.campaign._spec import CampaignSpec
from sreforge.campaign._store import CampaignStore, Result, TrialKey, pending_trials

__all__ = ["CampaignEnd", "run_campaign"]

_TICK_S = 1.0
_QUIET_S = 30.0  # a progress line at least this often while nothing ends
_HOST_RETRIES = 2  # times one invocation reruns a trial whose worker host died


@dataclass
class CampaignEnd:
    """How the campaign command ended: `interrupted` by Ctrl-C, `errors` trials to retry."""

    interrupted: bool = False
    errors: int = 0
    pending: int = 0


@dataclass
class _Stop:
    """Ctrl-C once: `draining` (no new runs); twice: `now`."""

    draining: asyncio.Event = field(default_factory=asyncio.Event)
    now: asyncio.Event = field(default_factory=asyncio.Event)

    def signalled(self, stream: TextIO, running: int) -> None:
        if self.draining.is_set():
            self.now.set()
            print("campaign: stopping now; unfinished trials run again on resume", file=stream)
            return
        self.draining.set()
        print(
            f"campaign: stopping: no new runs; waiting for {running} running to end with "
            "their records (Ctrl-C again to leave now)", file=stream, flush=True,
        )  # fmt: skip


async def run_campaign(
    settings: EngineSettings, store: CampaignStore, spec: CampaignSpec, stream: TextIO
) -> CampaignEnd:
    """Run the campaign's pending trials; every finished one is a line of `results.jsonl`."""
    results = store.results()
    queue = deque(pending_trials(spec, results))
    admission = Admission(spec.concurrency, spec.stack_memory_mb, spec.reserve_memory_mb)
    slots = admission.slots(available_memory_mb())
    print(
        f"campaign {store.campaign_id}: {len(queue)} trials to run, {slots} at once "
        f"(concurrency {spec.concurrency}); results in {store.path}", file=stream, flush=True,
    )  # fmt: skip
    stop = _Stop()
    running: dict[asyncio.Task[Result], TrialKey] = {}
    walls = [r.wall_s for r in results if r.wall_s is not None and r.verdict != "error"]
    retried: dict[TrialKey, int] = {}
    null = open(os.devnull, "w")  # noqa: ASYNC230, SIM115 -- a sink for each trial's phase lines
    with _on_sigint(lambda: stop.signalled(stream, len(running))), null:
        async with engine_session(settings, client="sreforge-campaign") as engine:
            said = time.monotonic()
            while (queue and not stop.draining.is_set()) or running:
                while (
                    queue
                    and not stop.draining.is_set()
                    and engine.crashed() is None
                    and admission.admit(len(running), slots, available_memory_mb())
                ):
                    key = queue.popleft()
                    trial = Trial(key.scenario, key.agent, spec.time_scale, Progress(null),
                                  spec.topology)  # fmt: skip
                    running[asyncio.create_task(_one(engine, trial, key))] = key
                if not running:  # nothing admitted: the engine is gone (or a Ctrl-C came)
                    break
                ended, _ = await asyncio.wait(running, timeout=_TICK_S)
                if stop.now.is_set():
                    break
                for task in ended:
                    del running[task]
                    result = task.result()
                    store.append(result)
                    results.append(result)
                    if result.wall_s is not None and result.verdict != "error":
                        walls.append(result.wall_s)
                    print(_ended_line(result), file=stream, flush=True)
                    if lost_its_host(result) and retried.get(result.key, 0) < _HOST_RETRIES:
                        retried[result.key] = retried.get(result.key, 0) + 1
                        queue.appendleft(result.key)  # its host died: run it again now
                        print(_retry_line(result), file=stream, flush=True)
                if ended or time.monotonic() - said > _QUIET_S:
                    said = time.monotonic()
                    line = format_progress(
                        spec, results, running=len(running), queued=len(queue),
                        mean_wall_s=sum(walls) / len(walls) if walls else None, slots=slots,
                        stopping=stop.draining.is_set(),
                    )  # fmt: skip
                    print(line, file=stream, flush=True)
                if ended:
                    _write_summaries(store, spec, results)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
    _write_summaries(store, spec, results)
    left = pending_trials(spec, results)
    errors = sum(1 for r in {r.key: r for r in results}.values() if r.verdict == "error")
    return CampaignEnd(stop.draining.is_set(), errors, len(left))


async def _one(engine: RunningEngine, trial: Trial, key: TrialKey) -> Result:
    """One trial's result; a failure of the follow itself is an `error` line (retried on
    resume), never the end of the campaign with other runs still in flight."""
    started = time.monotonic()
    try:
        outcome = await trial.run(engine)
    except Exception as error:  # any failure of one trial is that trial's
        outcome = Outcome(None, "error", reason=f"following the run failed: {error!r}")
    return result_of(key, outcome, time.monotonic() - started)


def _ended_line(result: Result) -> str:
    score = "" if result.score is None else f", score {result.score:.2f}"
    why = f" ({result.reason})" if result.verdict == "error" and result.reason else ""
    return (
        f"  {result.agent} x {result.scenario} #{result.trial}: {result.verdict}{score}{why}"
        f" — run {result.run_id or '(none)'} in {result.wall_s or 0:.0f}s"
    )


def _retry_line(result: Result) -> str:
    return (
        f"  {result.agent} x {result.scenario} #{result.trial}: its worker host died; "
        "running it again"
    )


def _write_summaries(store: CampaignStore, spec: CampaignSpec, results: list[Result]) -> None:
    store.write_summaries(summary(store.campaign_id, spec, results), groups_of(spec, results))


@contextlib.contextmanager
def _on_sigint(handler: Callable[[], None]) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, handler)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
