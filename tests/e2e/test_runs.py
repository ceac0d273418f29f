"""End to end: `sreforge run` over the embedded engine, one real stack per run.

Each run is the real CLI in a subprocess with its own engine home, record dir and
stacks root (its own nats-server, trigger, Prometheus, Alertmanager, app and git);
a run that needs a doctored scenario gets its own copy of `use-cases/`. The
selected runs are started up front and run `SREFORGE_E2E_PARALLEL` at a time
(default 2: the machine has 2 cores); each test waits for its own run and checks
its verdict, its one schema-valid record and that nothing of it remains.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import psutil
import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "libs" / "contracts" / "schemas" / "run-record.v1.schema.json"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCENARIO = "latency-cache-stampede"
TIME_SCALE = "0.1"
RUN_LIMIT_S = 280.0
SCENARIO_PARTS = ("*", "scenarios", SCENARIO)


def _harmless_change(cases: Path) -> None:
    """The scenario's recent deploy becomes a docs-only commit: the alert never fires."""
    (inject,) = cases.glob("/".join((*SCENARIO_PARTS, "inject")))
    for patch in inject.glob("*.patch"):
        patch.unlink()
    shutil.copyfile(FIXTURES / "harmless-change.patch", inject / "01-docs.patch")


def _without_page(cases: Path) -> None:
    """The scenario loses its `trigger.md`: the context stage cannot brief the run."""
    (page,) = cases.glob("/".join((*SCENARIO_PARTS, "trigger.md")))
    page.unlink()


@dataclass(frozen=True)
class RunSpec:
    """What one run is given: its agent and, optionally, how its scenario is doctored."""

    agent: str
    doctor: Callable[[Path], None] | None = None


# Longest first (measured walls in seconds, 2 at a time on 2 cores), so the pool's
# slots finish close together: 160-190 s for all seven.
RUNS = {
    "reference": RunSpec("reference"),  # ~90
    "negative": RunSpec("scripted:longer-ttl"),  # ~60
    "silent": RunSpec("noop", _harmless_change),  # ~50: stack, arm, 24 s confirm-fire
    "breaks-tests": RunSpec("scripted:break-tests"),  # ~45
    "no-page": RunSpec("noop", _without_page),  # ~35
    "noop": RunSpec("noop"),  # ~35
    "kills-load": RunSpec("scripted:kill-load"),  # ~33
}
AGENTS = sorted({spec.agent for spec in RUNS.values()})
TEST_RUNS = {
    "test_reference_fix_passes": "reference",
    "test_negative_fixture_fails": "negative",
    "test_submission_breaking_the_tests_is_rejected": "breaks-tests",
    "test_noop_agent_fails": "noop",
    "test_agent_killing_the_load_does_not_pass": "kills-load",
    "test_alert_that_never_fires_aborts": "silent",
    "test_stage_that_cannot_work_ends_in_error": "no-page",
}
CASES_NOISE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache", "*.db")
GRADED_TIMINGS = ("stack", "arm", "trigger", "context", "run", "ci", "redeploy", "verify")


@dataclass
class Run:
    """One `sreforge run` subprocess and everything it was given and left."""

    name: str
    agent: str
    root: Path
    cases: Path | None = None
    started: float = 0.0
    wall_s: float | None = None
    exit_code: int | None = None
    stdout: str = ""
    pid: int | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def records_dir(self) -> Path:
        """Where the recorder writes `runs/<run_id>/`."""
        return self.root / "records"

    @property
    def stacks_dir(self) -> Path:
        """The deployer's runs root: stack run dirs live here while the run lasts."""
        return self.root / "stacks"

    @property
    def progress(self) -> str:
        """The CLI's progress lines (stderr), for failure messages."""
        log = self.root / "stderr.log"
        return log.read_text(errors="replace")[-4000:] if log.exists() else ""

    def env(self) -> dict[str, str]:
        """The operator's environment minus every SREFORGE_* setting, plus this run's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SREFORGE_")}
        env.update(
            SREFORGE_HOME=str(self.root / "home"),
            SREFORGE_RECORDER_RUNS_DIR=str(self.records_dir),
            SREFORGE_RECORDER_BANK="false",
            SREFORGE_DEPLOYER_RUNS_ROOT=str(self.stacks_dir),
            SREFORGE_CORRELATOR_AGENTS=",".join(AGENTS),
            SREFORGE_RUNNER_SCRIPTS_DIR=str(FIXTURES),
            SREFORGE_LOG_FORMAT="json",
        )
        if self.cases is not None:  # every service and the CLI read this one
            env["SREFORGE_USE_CASES"] = str(self.cases)
        return env

    def execute(self) -> None:
        """Run the CLI to completion (or the limit), in its own session."""
        argv = [sys.executable, "-m", "sreforge", "run", SCENARIO, "--agent", self.agent]
        argv += ["--time-scale", TIME_SCALE, "--json"]
        self.started = time.monotonic()
        with (self.root / "stderr.log").open("w") as stderr:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
            self.pid = proc.pid
            try:
                self.stdout, _ = proc.communicate(timeout=RUN_LIMIT_S)
            except subprocess.TimeoutExpired:
                _kill_session(proc.pid)
                self.stdout, _ = proc.communicate()
            self.exit_code = proc.returncode
        self.wall_s = time.monotonic() - self.started


class RunPool:
    """Starts every run at once, at most `parallel` at a time, in the order given."""

    def __init__(self, base: Path, parallel: int, wanted: set[str]) -> None:
        self.runs = {
            name: _prepared(name, spec, base / name)
            for name, spec in RUNS.items()
            if name in wanted
        }
        self._slots = threading.Semaphore(parallel)
        self._threads = [
            threading.Thread(target=self._serve, args=(run,), daemon=True)
            for run in self.runs.values()
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self, run: Run) -> None:
        with self._slots:
            try:
                run.execute()
            finally:
                run.done.set()

    def result(self, name: str) -> Run:
        """The finished run `name` (fails the test if it never finishes)."""
        run = self.runs[name]  # KeyError: a test missing from TEST_RUNS
        if not run.done.wait(timeout=2 * RUN_LIMIT_S):
            pytest.fail(f"run {name} did not finish in time:\n{run.progress}")
        return run

    def close(self) -> None:
        """Kill whatever is still running and wait for the launcher threads."""
        for run in self.runs.values():
            if run.pid is not None and not run.done.is_set():
                _kill_session(run.pid)
        for thread in self._threads:
            thread.join(timeout=30)


def _prepared(name: str, spec: RunSpec, root: Path) -> Run:
    """The run's folder, with its own doctored copy of `use-cases/` when it needs one."""
    root.mkdir()
    if spec.doctor is None:
        return Run(name, spec.agent, root)
    cases = root / "cases"
    shutil.copytree(REPO / "use-cases", cases, ignore=CASES_NOISE)
    spec.doctor(cases)
    return Run(name, spec.agent, root, cases)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected tests' runs, all started when the first asks; torn down after the module."""
    selected = {item.name for item in request.session.items}
    wanted = {run for test, run in TEST_RUNS.items() if test in selected}
    base = Path(tempfile.mkdtemp(prefix="runs-"))
    parallel = max(1, int(os.environ.get("SREFORGE_E2E_PARALLEL", "2")))
    runs = RunPool(base, parallel, wanted)
    try:
        yield runs
    finally:
        runs.close()
        shutil.rmtree(base, ignore_errors=True)


def finished(
    pool: RunPool, name: str, *, graded: bool = True
) -> tuple[Run, dict[str, Any], dict[str, Any]]:
    """The run, its `--json` outcome and its one validated record (with signals if graded)."""
    run = pool.result(name)
    print(f"\n{name}: wall {run.wall_s:.1f} s, exit {run.exit_code}")
    print("\n".join(line for line in run.progress.splitlines() if not line.startswith("{")))
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"{name}: expected one JSON outcome, got {run.stdout!r}\n{run.progress}"
    outcome = json.loads(lines[0])
    records = sorted(run.records_dir.glob("*/record.json"))
    assert len(records) == 1, f"{name}: expected one record, found {records}\n{run.progress}"
    assert outcome["record"] == str(records[0]), f"{name}: CLI names {outcome['record']}"
    record = json.loads(records[0].read_text())
    for found in record["score"]["signals"]:
        print(f"  {found['id']:<16} {found['satisfied']!s:<5} {found['detail']}")
    jsonschema.validate(record, json.loads(SCHEMA.read_text()))
    assert record["run_id"] == outcome["run_id"]
    assert record["verdict"] == outcome["verdict"], f"{name}: record and CLI disagree"
    if graded:
        assert record["score"]["signals"], f"{name}: no signals: {outcome}\n{run.progress}"
        assert isinstance(record["sli_series"], list)
    live = {r.pid for r in pool.runs.values() if r is not run and r.pid and not r.done.is_set()}
    assert_nothing_left(run, records[0].parent, live)
    return run, outcome, record


def assert_nothing_left(run: Run, record_dir: Path, live_runs: set[int]) -> None:
    """No process of the run, no listener on a port its stack used, no stack run dir.

    A run still going (`live_runs`: their CLI pids) may have leased a port this run
    released: its listeners are its own, not this run's leftovers.
    """
    ports = _stack_ports(record_dir / "events.jsonl")
    assert ports, f"{run.name}: no StackReady endpoints in the event log"
    left_dirs = list(run.stacks_dir.iterdir()) if run.stacks_dir.exists() else []
    assert not left_dirs, f"{run.name}: stack run dirs remain: {left_dirs}"
    listening = {
        conn.laddr.port
        for conn in psutil.net_connections("tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr and not _started_by(conn.pid, live_runs)
    }
    assert not (ports & listening), f"{run.name}: ports still listening: {ports & listening}"
    survivors = [p for p in psutil.process_iter(["pid", "cmdline"]) if _belongs(p, run)]
    assert not survivors, f"{run.name}: processes remain: {[p.info for p in survivors]}"


def _stack_ports(events: Path) -> set[int]:
    for line in events.read_text().splitlines():
        event = json.loads(line)["event"]
        if event["type"] == "StackReady":
            return {urlsplit(url).port or 0 for url in event["operator_endpoints"].values()}
    return set()


def _started_by(pid: int | None, runs: set[int]) -> bool:
    """Whether `pid` descends from (or shares a session with) one of the `runs`' CLIs."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        lineage = {pid, *(parent.pid for parent in proc.parents()), os.getsid(pid)}
    except (ProcessLookupError, psutil.Error):
        return False
    return bool(lineage & runs)


def _belongs(proc: psutil.Process, run: Run) -> bool:
    try:
        if run.pid is not None and os.getsid(proc.pid) == run.pid:
            return True
        if str(run.root) in " ".join(proc.info["cmdline"] or ()):
            return True
        return Path(proc.cwd()).is_relative_to(run.root)  # e.g. the app in the workspace
    except (ProcessLookupError, psutil.Error):
        return False


@pytest.mark.timeout(300)
def test_reference_fix_passes(pool: RunPool) -> None:
    """The reference fix goes through CI, merge and a gated redeploy, and passes."""
    run, outcome, record = finished(pool, "reference")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 0
    assert record["ci"]["green"]
    assert "passed" in record["ci"]["output"]
    assert record["deploy"]["redeployed"]
    assert record["deploy"]["readiness"] == "passed"
    assert record["sli_series"], "a graded run has SLI samples"
    missing = [t for t in GRADED_TIMINGS if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_negative_fixture_fails(pool: RunPool) -> None:
    """The known-bad fix (a longer TTL) is deployed but does not mitigate: failed."""
    run, outcome, record = finished(pool, "negative")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"]["green"]
    assert record["deploy"]["redeployed"]
    assert record["sli_series"], "a graded run has SLI samples"
    missing = [t for t in GRADED_TIMINGS if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_submission_breaking_the_tests_is_rejected(pool: RunPool) -> None:
    """A fix that breaks the app's own tests is stopped by CI: rejected, with its output."""
    run, outcome, record = finished(pool, "breaks-tests")
    assert outcome["verdict"] == "rejected", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    ci = record["ci"]
    assert ci["green"] is False
    assert ci["exit_code"] == 1
    assert "test_entries_are_fresh_then_stale_then_gone" in ci["output"]
    assert "failed" in ci["output"]
    assert record["deploy"] is None, "a red submission is never deployed"
    missing = [t for t in ("stack", "arm", "trigger", "run", "ci") if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_noop_agent_fails(pool: RunPool) -> None:
    """An agent that never submits fails closed after a real page."""
    run, outcome, record = finished(pool, "noop")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"] is None
    assert record["deploy"] is None
    phases = ("stack", "arm", "trigger", "context", "run")
    missing = [t for t in phases if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_agent_killing_the_load_does_not_pass(pool: RunPool) -> None:
    """An agent that kills the load generator, then ships the real fix, does not pass."""
    run, outcome, record = finished(pool, "kills-load", graded=False)
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"] is not None, "the fix went through CI"
    assert record["ci"]["green"], "the fix itself is fine"
    assert record["trajectory"]["submitted"], "the agent got as far as submitting"
    why = [s["detail"] for s in record["score"]["signals"] if not s["satisfied"]]
    why += [str(record["deploy"]), str(record["abort_reason"])]
    assert any("load" in text for text in why), f"nothing names the load: {why}"


@pytest.mark.timeout(300)
def test_alert_that_never_fires_aborts(pool: RunPool) -> None:
    """A harmless recent deploy never pages: confirm-fire gives up and the run is aborted."""
    run, outcome, record = finished(pool, "silent", graded=False)
    assert outcome["verdict"] == "aborted", f"{outcome}\n{run.progress}"
    assert run.exit_code == 3
    reason = record["abort_reason"] or ""
    assert reason.startswith("confirm-fire: "), reason
    assert "BookshelfApiLatencyP99High" in reason, reason
    assert "did not fire" in reason, reason
    assert record["trigger"] is None, "nothing fired"
    assert record["ci"] is None
    assert record["deploy"] is None


@pytest.mark.timeout(300)
def test_stage_that_cannot_work_ends_in_error(pool: RunPool) -> None:
    """A scenario without its page: the context stage fails the paged run with `error`."""
    run, outcome, record = finished(pool, "no-page", graded=False)
    assert outcome["verdict"] == "error", f"{outcome}\n{run.progress}"
    assert run.exit_code == 4
    reason = record["abort_reason"] or ""
    assert reason.startswith("context: "), reason
    assert "trigger.md" in reason, reason
    assert record["trigger"] is not None, "the alert did fire before the stage failed"
    assert record["ci"] is None
    assert record["deploy"] is None
