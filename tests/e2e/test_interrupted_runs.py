"""End to end: `sreforge run` stopped mid-run, as an operator or `timeout` stops it.

Each run is stopped right after its stack is up (the cheapest point where a whole stack
runs): SIGINT with the CLI's follow lost beforehand, and SIGTERM, must each end the run
`aborted` with exactly one schema-valid record and nothing of it left; SIGKILL gives
the CLI no say, and still nothing of the run may be left within seconds (its stack's
warden). The runs go in the session's pool of whole runs (`wholerun`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from wholerun import (
    SCENARIO,
    TIME_SCALE,
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    finished,
    open_pool,
)

pytestmark = pytest.mark.integration

INTERRUPTED = 130
STACK_UP_S = 240.0  # the engine and the stack starting on a loaded machine
GONE_S = 20.0

# `sreforge run` whose follow of the run is lost for good once the stack is up (every
# later follow fails too), as when the engine is too busy to create a consumer in time.
LOST_FOLLOW = """
import sys
import nats.errors
from sreforge import _run_follow
from sreforge.cli import main

real, calls = _run_follow.follow, []


async def lost_after_the_stack(bus, subject):
    calls.append(subject)
    if len(calls) > 1:
        raise nats.errors.TimeoutError
    async for message in real(bus, subject):
        yield message
        if message.subject.endswith(".StackReady"):
            raise nats.errors.TimeoutError


_run_follow.follow = lost_after_the_stack
sys.exit(main(sys.argv[1:]))
"""


def _with_lost_follow(run: Run) -> None:
    """Run the CLI with its follow lost after StackReady (`LOST_FOLLOW`)."""
    argv = [sys.executable, "-c", LOST_FOLLOW, "run", SCENARIO, "--agent", run.agent]
    argv += ["--time-scale", TIME_SCALE, "--json"]
    run.started = time.monotonic()
    run.follow(argv, run.env())
    run.wall_s = time.monotonic() - run.started


def _stack_up(run: Run) -> dict[str, int] | None:
    """The stack's ports once every component is up (StackReady shown), else None."""
    if "stack ready" not in run.progress:
        return None
    for state in run.stacks_dir.glob("*/stack.json"):
        return dict(json.loads(state.read_text())["ports"])
    return None


def _stop_when_up(signum: int) -> Callable[[Run], None]:
    """Beside the CLI: send `signum` to it once its stack is up (its ports kept)."""

    def stop(run: Run) -> None:
        deadline = time.monotonic() + STACK_UP_S
        while not run.exited.is_set() and time.monotonic() < deadline:
            ports = _stack_up(run)
            if ports is not None and run.pid is not None:
                (run.root / "ports.json").write_text(json.dumps(ports))
                os.kill(run.pid, signum)
                return
            run.exited.wait(0.2)

    return stop


RUNS = {
    "sigint-lost": RunSpec("noop", execute=_with_lost_follow, beside=_stop_when_up(signal.SIGINT)),
    "sigterm": RunSpec("noop", beside=_stop_when_up(signal.SIGTERM)),
    "sigkill": RunSpec("noop", beside=_stop_when_up(signal.SIGKILL)),
}
TEST_RUNS = {
    "test_sigint_with_a_lost_follow_ends_the_run_aborted_with_one_record": "sigint-lost",
    "test_sigterm_ends_the_run_aborted_with_one_record_and_nothing_left": "sigterm",
    "test_sigkill_leaves_nothing_of_the_run_within_seconds": "sigkill",
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The module's runs, from the session's pool."""
    with open_pool(request, WHOLE_RUNS) as started:
        yield started


def _interrupted(pool: RunPool, name: str) -> None:
    run = pool.result(name)
    assert (run.root / "ports.json").exists(), f"{name}: never stopped:\n{run.progress}"
    run, outcome, record = finished(pool, name, graded=False)
    assert run.exit_code == INTERRUPTED, run.progress
    assert outcome["verdict"] == record["verdict"] == "aborted"
    assert record["abort_reason"].startswith("interrupted: `sreforge run` was stopped"), record


@pytest.mark.timeout(900)
def test_sigint_with_a_lost_follow_ends_the_run_aborted_with_one_record(pool: RunPool) -> None:
    """Ctrl-C after the CLI lost its follow for good: the engine stays up until the run's
    record is on disk, so the run still has exactly one record, and nothing is left."""
    _interrupted(pool, "sigint-lost")
    assert "lost the run's event stream" in pool.result("sigint-lost").progress


@pytest.mark.timeout(900)
def test_sigterm_ends_the_run_aborted_with_one_record_and_nothing_left(pool: RunPool) -> None:
    """`timeout` or `kill` takes Ctrl-C's path: aborted, recorded, the stack torn down."""
    _interrupted(pool, "sigterm")


@pytest.mark.timeout(900)
def test_sigkill_leaves_nothing_of_the_run_within_seconds(pool: RunPool) -> None:
    """SIGKILL gives the CLI no say: its stack's warden takes the stack down at once."""
    run = pool.result("sigkill")
    ports_file = run.root / "ports.json"
    assert ports_file.exists(), f"never killed:\n{run.progress}"
    ports = set(json.loads(ports_file.read_text()).values())
    deadline = time.monotonic() + GONE_S
    while (left := _left_of(run, ports)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"left {GONE_S:g}s after SIGKILL: {left}\n{run.progress}"


def _left_of(run: Run, ports: set[int]) -> list[str]:
    """What of the run is still there: its processes, its stack's listeners, stack dirs."""
    found = [f"stack dir {path}" for path in run.stacks_dir.glob("*")]
    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port in ports:
            found.append(f"port {conn.laddr.port} listening (pid {conn.pid})")
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid == run.pid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            mine = str(run.root) in " ".join(proc.info["cmdline"] or ())
            if mine or Path(proc.cwd()).is_relative_to(run.root):
                found.append(f"process {proc.pid}: {proc.info['cmdline']}")
        except psutil.Error:
            continue
    return found
