"""A correct fix on a machine overloaded on purpose is never `failed` (issue 28).

Ten reference runs at once on two cores were judged `failed` at load average 38: the
harness charged its own overload to the agent. One whole run of the reference fix, with
processes spinning on every core beside it from the moment the redeploy resumes the load
until the run ends (three per core, at the run's own priority): the verdict is `error`
(the oracle's `harness_unstarved`: a campaign reruns it) or, if the fix held all the
same, `passed`; never `failed`. The whole-run session runs every module's runs behind
one set of slots, so the overload would starve whatever runs beside it (a negative
expecting `failed` then ends `error`): the test runs only when asked,
`SREFORGE_E2E_OVERLOAD=1`, with no other whole run selected.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from wholerun import Run, RunPool, RunSpec, WholeRuns, finished, kill_session, open_pool

OVERLOAD = os.environ.get("SREFORGE_E2E_OVERLOAD") == "1"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not OVERLOAD, reason="overloads the machine: SREFORGE_E2E_OVERLOAD=1, run alone"
    ),
]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BURNERS = 3 * (os.cpu_count() or 2)
_SUBMITTED = Path(".oncall") / "submitted"
_LOADGEN = re.compile(r"job_name: *loadgen\s+static_configs:\s+- targets:\s+- '?127\.0\.0\.1:(\d+)")


def _status(port: str) -> bool | None:
    """Whether the run's load generator is paused; `None` when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=3) as answer:
            return bool(json.loads(answer.read())["paused"])
    except (OSError, ValueError, KeyError):
        return None


def _redeployed(run: Run) -> bool:
    """Wait for the submission, then for the redeploy's drain: the load paused, then
    resumed. False when the run ends first."""
    workspace = None
    while workspace is None or not (workspace / _SUBMITTED).exists():
        if run.exited.wait(0.2):
            return False
        workspace = next(run.stacks_dir.glob("*/workspace"), None)
    config = workspace.parent / "observability" / "prometheus.yml"
    found = _LOADGEN.search(config.read_text())
    if found is None:
        return False
    seen_pause = False
    while not run.exited.wait(0.05):
        paused = _status(found.group(1))
        seen_pause = seen_pause or paused is True
        if seen_pause and paused is False:
            return True
    return False


def _overload(run: Run) -> None:
    """Beside the run: `BURNERS` spinning processes from the redeploy to the run's end;
    what happened goes to `overload.log` in the run's folder."""
    with (run.root / "overload.log").open("w") as log:
        if not _redeployed(run):
            print("no redeploy seen", file=log, flush=True)
            return
        spin = [sys.executable, "-c", "while True: pass"]
        burners = [subprocess.Popen(spin, start_new_session=True) for _ in range(BURNERS)]
        print(f"{BURNERS} burners started at {time.time():.1f}", file=log, flush=True)
        run.exited.wait()
        for burner in burners:
            kill_session(burner.pid)
            burner.wait()
        print(f"burners stopped at {time.time():.1f}", file=log, flush=True)


RUNS = {"overloaded-reference": RunSpec("reference", beside=_overload)}
TEST_RUNS = {"test_a_correct_fix_on_an_overloaded_machine_is_never_failed": "overloaded-reference"}
# Unasked, the session must not even start the run: it would overload every other one.
WHOLE_RUNS = WholeRuns(
    RUNS if OVERLOAD else {}, TEST_RUNS if OVERLOAD else {}, scripts_dir=FIXTURES
)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """This module's one run, started when the test asks; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(400)
def test_a_correct_fix_on_an_overloaded_machine_is_never_failed(pool: RunPool) -> None:
    """The reference fix graded while every core spins: `error` naming the measures past
    their bounds, or `passed` with the host's measures in the record; never `failed`."""
    run, outcome, record = finished(pool, "overloaded-reference", graded=False)
    log = (run.root / "overload.log").read_text()
    assert "burners started" in log, f"the overload never started: {log}\n{run.progress}"
    assert outcome["verdict"] in ("error", "passed"), f"{outcome}\n{run.progress}"
    if outcome["verdict"] == "error":
        reason = record["abort_reason"] or ""
        assert reason.startswith("oracle: the harness was starved"), reason
        assert "CPU pressure averaged" in reason, reason
    else:
        signals = {found["id"]: found for found in record["score"]["signals"]}
        assert "harness_unstarved" in signals, sorted(signals)
