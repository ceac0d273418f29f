"""Whole runs as users run them: `sreforge run … --json` subprocesses, a few at a time.

Each run is the real CLI in a subprocess with its own engine home (`<run root>/sreforge-home`:
a harness word in its path, like the default layout's), record dir and stacks root (its
own nats-server, trigger, Prometheus, Alertmanager, app and git); a run that needs a
doctored scenario gets its own copy of `use-cases/`. Runs start as `Slots` let them: one
set of slots for the session's every run (`_session`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sreforge_contracts import Surface, Tells, find_leaks
from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_topology import ComposeTopologies, PerRunTopologies
from sreforge_deployer.local import LocalTopologies

REPO = Path(__file__).resolve().parents[3]
SCENARIO = "latency-cache-stampede"
TIME_SCALE = "0.1"
RUN_LIMIT_S = 360.0  # a compose run took 274 s on a machine at load 20
DOCKER_LANE = "docker"
"""The lane (`RunSpec.lane`) of the runs that drive the Docker engine: compose stacks and
compose.yaml's engine. Beside each other in CI, a compose reference run and compose.yaml's
failed the client-side SLI by a hair (98.9% of requests within the bar, 99% needed); alone,
under 16 CPU hogs or under a disk-write and image-build storm, the run held 100%. So they
take turns."""
SCENARIO_PARTS = ("*", "scenarios", SCENARIO)
ENGINE_HOME = "sreforge-home"
"""The engine home's folder under a run's root (its name carries a harness word on purpose;
the run root's own name, the module's RUNS key, must carry none: the workspace is under it)."""
RUN_CACHE = "SREFORGE_DEPLOYER_CACHE_DIR"
"""Where the session's runs keep what a run makes once for every later run (seed
snapshots, the CI gate's learned base reports; set by the root `conftest.py`): with every
run's own engine home each would make them anew, as no operator's campaign does."""
CASES_NOISE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache", "*.db")


@dataclass(frozen=True)
class RunSpec:
    """What one run is given: its agent and, optionally, how its scenario is doctored
    or how its folder is prepared before it starts."""

    agent: str
    doctor: Callable[[Path], None] | None = None
    prepare: Callable[[Run], None] | None = None
    beside: Callable[[Run], None] | None = None
    """Runs in a thread while the CLI does; must return once `run.exited` is set."""
    topology: str = "local"
    """`sreforge run --topology`: where the run's stack runs."""
    execute: Callable[[Run], None] | None = None
    """Runs the run instead of `Run.execute` (`sreforge run` in a subprocess), e.g. the
    crash matrix's plan on a topology of its own; it must set the run's `pid` and
    `exit_code` and return once the run is over."""
    scenario: str = SCENARIO
    """The scenario the run runs (`sreforge run <scenario>`)."""
    lane: str | None = None
    """Runs of one lane never run at the same time (e.g. `docker`: the runs that drive the
    Docker engine, whose container churn and image builds disturb each other's windows)."""


@dataclass(frozen=True)
class Canaries:
    """Random values the agent must never reach and nothing of the run may contain."""

    env_value: str
    file_content: str
    files: tuple[Path, ...]

    @classmethod
    def planted(cls, *files: Path) -> Canaries:
        """Write one random canary into each of `files` (the env value is set by the run)."""
        content = f"canary-file-{secrets.token_hex(16)}"
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content + "\n")
        return cls(f"canary-env-{secrets.token_hex(16)}", content, files)

    @property
    def values(self) -> tuple[str, str]:
        """The two secret values."""
        return self.env_value, self.file_content


@dataclass
class Run:
    """One `sreforge run` subprocess and everything it was given and left."""

    name: str
    agent: str
    root: Path
    agents: tuple[str, ...] = ()
    """Every agent the module's runs use: the correlator's allowlist."""
    scripts_dir: Path | None = None
    """Where `scripted:<name>` agents are found."""
    cases: Path | None = None
    started: float = 0.0
    wall_s: float | None = None
    exit_code: int | None = None
    stdout: str = ""
    pid: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    """Set when the CLI has exited (before `done`, which waits for what ran beside it)."""
    extra_env: dict[str, str] = field(default_factory=dict)
    canaries: Canaries | None = None
    check_output: str = ""
    bystander: socket.socket | None = None
    """A host listener the run's agent must not reach (its network namespace)."""
    kept_globs: tuple[str, ...] = ()
    """Files of the stack run dir (globs under it, e.g. `*/logs/*.log`) copied to `kept`."""
    topology: str = "local"
    scenario: str = SCENARIO
    left_at_limit: list[str] = field(default_factory=list)
    """What a run killed at `RUN_LIMIT_S` left after its stacks were taken down."""

    @property
    def engine_home(self) -> Path:
        """The run's `SREFORGE_HOME`, named as the default (`~/.local/state/sreforge`) is:
        with a harness word in its path, so an agent-visible surface that shows any path
        under it trips the contamination guard here too, not only in `./scripts/demo`."""
        return self.root / ENGINE_HOME

    @property
    def agent_logs(self) -> Path:
        """Copies of the stack run dir's `agent/` files (the teardown removes the originals)."""
        return self.root / "agent-logs"

    @property
    def kept(self) -> Path:
        """Copies of the files `kept_globs` names (the teardown removes the originals)."""
        return self.root / "kept"

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
            SREFORGE_HOME=str(self.engine_home),
            SREFORGE_RECORDER_RUNS_DIR=str(self.records_dir),
            SREFORGE_RECORDER_BANK="false",
            SREFORGE_DEPLOYER_RUNS_ROOT=str(self.stacks_dir),
            SREFORGE_CORRELATOR_AGENTS=",".join(self.agents or (self.agent,)),
            SREFORGE_LOG_FORMAT="json",
        )
        if RUN_CACHE in os.environ:
            env[RUN_CACHE] = os.environ[RUN_CACHE]
        if self.scripts_dir is not None:
            env["SREFORGE_RUNNER_SCRIPTS_DIR"] = str(self.scripts_dir)
        if self.cases is not None:  # every service and the CLI read this one
            env["SREFORGE_USE_CASES"] = str(self.cases)
        env.update(self.extra_env)
        return env

    def execute(self) -> None:
        """Run the CLI to completion (or the limit), in its own session."""
        argv = [sys.executable, "-m", "sreforge", "run", self.scenario, "--agent", self.agent]
        argv += ["--time-scale", TIME_SCALE, "--json"]
        if self.topology != "local":
            argv += ["--topology", self.topology]
        self.started = time.monotonic()
        if self.follow(argv, self.env()):
            self.left_at_limit = down_stacks(self.stacks_dir)
        self.wall_s = time.monotonic() - self.started

    def follow(self, argv: list[str], env: Mapping[str, str]) -> bool:
        """Run `argv` from the checkout in a session of its own until it exits or
        `RUN_LIMIT_S` passes (then the session is killed): its pid, stdout and exit code on
        the run, its stderr in `stderr.log`. True when it was killed at the limit."""
        with (self.root / "stderr.log").open("w") as stderr:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
            self.pid = proc.pid
            try:
                self.stdout, _ = proc.communicate(timeout=RUN_LIMIT_S)
                killed = False
            except subprocess.TimeoutExpired:
                kill_session(proc.pid)
                self.stdout, _ = proc.communicate()
                killed = True
            self.exit_code = proc.returncode
        return killed


class Slots:
    """At most `limit` runs at once; a waiting run with the lower priority goes first.

    The limit may change while runs hold slots (`set_limit`): a lower one admits no new
    run until enough have ended, a higher one admits the next at once. Runs of one `lane`
    never overlap: a run whose lane is busy lets the next one in the queue go before it.
    """

    def __init__(self, limit: int) -> None:
        self._ready = threading.Condition()
        self._limit = limit
        self._held = 0
        self._busy: set[str] = set()
        self._waiting: list[tuple[int, int, str | None]] = []
        self._tickets = itertools.count()

    def set_limit(self, limit: int) -> None:
        """Let `limit` runs hold a slot at once from now on."""
        with self._ready:
            self._limit = limit
            self._ready.notify_all()

    @property
    def waiting(self) -> int:
        """How many runs wait for a slot."""
        with self._ready:
            return len(self._waiting)

    def _next(self) -> tuple[int, int, str | None] | None:
        free = (entry for entry in self._waiting if entry[2] is None or entry[2] not in self._busy)
        return min(free, default=None)

    @contextlib.contextmanager
    def held(self, priority: int, lane: str | None = None) -> Iterator[None]:
        """Hold one slot for the block, once every run before this one that could go has
        one (and no other run of `lane` holds one)."""
        with self._ready:
            ticket = (priority, next(self._tickets), lane)
            self._waiting.append(ticket)
            self._ready.wait_for(lambda: self._held < self._limit and self._next() == ticket)
            self._waiting.remove(ticket)
            self._held += 1
            if lane is not None:
                self._busy.add(lane)
            self._ready.notify_all()
        try:
            yield
        finally:
            with self._ready:
                self._held -= 1
                if lane is not None:
                    self._busy.discard(lane)
                self._ready.notify_all()


class RunPool:
    """Starts every run at once, each when `slots` gives it one (lower priority first)."""

    def __init__(
        self,
        base: Path,
        slots: Slots,
        specs: Mapping[str, RunSpec],
        *,
        scripts_dir: Path | None = None,
        priority: Mapping[str, int] | None = None,
    ) -> None:
        # A run's folder is named after its key and the workspace path (on the page) is under it.
        telling = find_leaks([Surface("run names", "\n".join(specs))], Tells())
        assert not telling, f"a run name carries a harness word: {telling}"
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        agents = tuple(sorted({spec.agent for spec in specs.values()}))
        self.runs = {
            name: _prepared(Run(name, spec.agent, base / name, agents, scripts_dir), spec)
            for name, spec in specs.items()
        }
        self._beside = {name: spec.beside for name, spec in specs.items() if spec.beside}
        self._execute = {name: spec.execute for name, spec in specs.items() if spec.execute}
        self._lanes = {name: spec.lane for name, spec in specs.items()}
        self._slots = slots
        self._closed = False
        order = priority or {}
        self._threads = [
            threading.Thread(target=self._serve, args=(run, order.get(run.name, 0)), daemon=True)
            for run in self.runs.values()
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self, run: Run, priority: int) -> None:
        with self._slots.held(priority, self._lanes.get(run.name)):
            if self._closed:  # the module or session ended before this run's turn
                run.exited.set()
                run.done.set()
                return
            keeper = threading.Thread(target=_keep_logs, args=(run,), daemon=True)
            if run.canaries is not None or run.kept_globs:
                keeper.start()
            beside = self._beside.get(run.name)
            companion = threading.Thread(target=beside, args=(run,), daemon=True)
            if beside is not None:
                companion.start()
            try:
                execute = self._execute.get(run.name, Run.execute)
                execute(run)
            finally:
                run.exited.set()
                if companion.is_alive():
                    companion.join(timeout=30)
                run.done.set()
                if keeper.is_alive():
                    keeper.join(timeout=30)

    def result(self, name: str) -> Run:
        """The finished run `name` (fails the test if it never finishes)."""
        run = self.runs[name]  # KeyError: a test missing from the module's test → run map
        if not run.done.wait(timeout=2 * RUN_LIMIT_S):
            pytest.fail(f"run {name} did not finish in time:\n{run.progress}")
        return run

    def live_pids(self) -> set[int]:
        """The CLI pids of this pool's runs still going."""
        return {r.pid for r in self.runs.values() if r.pid is not None and not r.done.is_set()}

    def close(self) -> None:
        """Start nothing more, kill whatever is still running (and take its stacks down),
        and wait for the launcher threads."""
        self._closed = True
        killed = [run for run in self.runs.values() if not run.done.is_set()]
        for pid in (run.pid for run in killed):
            if pid is not None:
                kill_session(pid)
        for thread in self._threads:
            thread.join(timeout=30)
        for run in killed:
            if run.pid is not None:
                run.left_at_limit = down_stacks(run.stacks_dir)
        for run in self.runs.values():
            if run.bystander is not None:
                run.bystander.close()


def private_cases(run: Run) -> Path:
    """The run's own copy of `use-cases/` (every service reads it); its scenario folder."""
    if run.cases is None:
        run.cases = run.root / "cases"
        shutil.copytree(REPO / "use-cases", run.cases, ignore=CASES_NOISE)
    (scenario,) = run.cases.glob(f"*/scenarios/{run.scenario}")
    return scenario


def _prepared(run: Run, spec: RunSpec) -> Run:
    """The run's folder, with its own doctored copy of `use-cases/` when it needs one."""
    run.root.mkdir()
    run.topology = spec.topology
    run.scenario = spec.scenario
    if spec.doctor is not None:
        run.cases = run.root / "cases"
        shutil.copytree(REPO / "use-cases", run.cases, ignore=CASES_NOISE)
        spec.doctor(run.cases)
    if spec.prepare is not None:
        spec.prepare(run)
    return run


def _keep_logs(run: Run) -> None:
    """Copy the agent's logs (and `kept_globs`) out of the stack run dir while it lasts."""
    places = [("*/agent/*", run.agent_logs), *((glob, run.kept) for glob in run.kept_globs)]
    for _, folder in places:
        folder.mkdir(exist_ok=True)
    while not run.done.wait(0.5):
        for glob, folder in places:
            for log in run.stacks_dir.glob(glob):
                with contextlib.suppress(OSError):  # gone with the teardown, or a dir
                    shutil.copyfile(log, folder / log.name)


def down_stacks(stacks_dir: Path) -> list[str]:
    """Take down every stack a killed run left under its stacks root, as a restarted
    deployer would (its stack processes run in sessions of their own); what is left."""
    if not stacks_dir.is_dir():
        return []
    local = LocalTopologies(DeployerSettings(runs_root=stacks_dir))
    topologies = PerRunTopologies(local, ComposeTopologies(local))
    left: list[str] = []
    for run_dir in sorted(path for path in stacks_dir.iterdir() if path.is_dir()):
        try:
            left += topologies.down_elsewhere(run_dir.name)
        except Exception as error:  # report it with the run's failure, do not mask it
            left.append(f"{run_dir.name}: {error!r}")
    return left


def kill_session(pid: int) -> None:
    """SIGKILL the process group `pid` leads, if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
