"""Fixtures for the bookshelf substrate: paths, scenario trees and real stack processes."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import yaml
from sreforge_deployer import DeployerSettings
from sreforge_deployer.gate import judge_of
from sreforge_deployer.gate._test_sets import JunitReport, SetName

USE_CASE = Path(__file__).resolve().parents[1]
STACK = USE_CASE / "stacks" / "bookshelf-flask"
APP = STACK / "app"
SCENARIO = USE_CASE / "scenarios" / "latency-cache-stampede"
FAULT_PATCH = SCENARIO / "inject" / "01-metadata-service-per-request.patch"
FIX_PATCH = SCENARIO / "solution" / "fix.patch"
NEGATIVE_PATCH = SCENARIO / "verify" / "negative" / "longer-ttl.patch"
PYTHON = sys.executable
_IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")
_GIT_ID = ["-c", "user.name=Ada Brandt", "-c", "user.email=ada.brandt@example.org"]


def git(repo: Path, *args: str) -> str:
    """Run git in `repo`; a failure shows git's own message."""
    done = subprocess.run(
        ["git", *_GIT_ID, *args], cwd=repo, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed in {repo}:\n{done.stderr}"
    return done.stdout


def app_repo(dest: Path, *, faulted: bool = False, patch: Path | None = None) -> Path:
    """A git repo of the healthy app tree; optionally the fault committed and a fix applied."""
    shutil.copytree(APP, dest, ignore=_IGNORED)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "Import bookshelf")
    if faulted:
        git(dest, "am", "-q", str(FAULT_PATCH))
    if patch is not None:
        git(dest, "apply", str(patch))
    return dest


def judged(tree: Path, scenario: Path, name: SetName, folder: Path) -> JunitReport:
    """The hidden tests in `folder` judged against `tree` served, as the CI gate judges
    the scenario's `name` set (in a process of their own, over HTTP)."""
    work = Path(tempfile.mkdtemp(dir=tree.parent, prefix="judged-"))
    judge = judge_of(DeployerSettings(python=PYTHON), scenario.name)
    code, output, report = judge(name, tree, folder, work)
    assert code in (0, 1), output[-3000:]
    assert report is not None, output[-3000:]
    assert report.cases, output[-3000:]
    return report


@pytest.fixture(scope="module")
def loadgen() -> Iterator[ModuleType]:
    """`loadgen` imported from the stack (it is not an installed package)."""
    path = str(STACK / "loadgen")
    sys.path.insert(0, path)
    try:
        yield importlib.import_module("loadgen")
    finally:
        sys.path.remove(path)


@pytest.fixture(scope="module")
def bookmeta() -> Iterator[ModuleType]:
    """`bookmeta` imported from the stack (it is not an installed package)."""
    path = str(STACK / "upstream")
    sys.path.insert(0, path)
    try:
        yield importlib.import_module("bookmeta")
    finally:
        sys.path.remove(path)


def app_suite(repo: Path, *args: str) -> None:
    """Run the app's own suite in `repo` (a subprocess, as CI's pytest would) and assert it
    is green, showing its output's tail when it is not."""
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=repo, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]


def edited_tests(patch: Path) -> list[str]:
    """The test files a patch edits or deletes (its `--- a/tests/...` sides; a test file it
    only adds is not one): CI rejects a submission that changes a hand-off test."""
    return [
        line.removeprefix("--- a/")
        for line in patch.read_text().splitlines()
        if line.startswith("--- a/tests/")
    ]


def paging_rule(alert: str) -> dict[str, Any]:
    """The rule of the stack's rules.yml that raises `alert` (a scenario's paging alert)."""
    rules = yaml.safe_load((STACK / "observability" / "rules.yml").read_text())
    found: dict[str, Any] = next(
        r for g in rules["groups"] for r in g["rules"] if r["alert"] == alert
    )
    return found


class Clock:
    """A monotonic clock a test moves by hand (`now`), starting at 100 s."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Component:
    """One running stack process (its own process group) and where it listens."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """Base URL on loopback."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        """SIGTERM the group, SIGKILL after 10 s; the exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(10)


Launcher = Callable[..., Component]


def _wait_healthy(component: Component, deadline_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if component.process.poll() is not None:
            pytest.fail(
                f"{component.name} exited early; log {component.log}:\n"
                f"{component.log.read_text()[-2000:]}"
            )
        try:
            if httpx.get(f"{component.url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{component.name} not healthy within {deadline_seconds}s; log {component.log}")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    """Start stack components as real processes; all are stopped at teardown."""
    started: list[Component] = []

    def start(
        name: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> Component:
        port = port or free_port()
        log = tmp_path / f"{name}-{port}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [a.replace("{port}", str(port)) for a in argv],
                cwd=cwd,
                env={**os.environ, **(env or {})},
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        component = Component(name, process, port, log)
        started.append(component)
        _wait_healthy(component)
        return component

    yield start
    for component in reversed(started):
        component.stop()


def seed_library(db_path: Path, workspace: Path = APP) -> Path:
    """`db_path` filled by the app's seed (deterministic: every seeding is the same library)."""
    if not db_path.exists():
        seed = [PYTHON, "-m", "bookshelf.seed", "--db", str(db_path), "--books", "20000"]
        subprocess.run(seed, cwd=workspace, check=True, capture_output=True)
    return db_path


@pytest.fixture(scope="session")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded library (20,000 books) shared by the tests that only read it."""
    return seed_library(tmp_path_factory.mktemp("library") / "bookshelf.db")


def start_bookmeta(launch: Launcher, *extra: str, library: Path | None = None) -> Component:
    """bookmeta as the stack runs it (cwd upstream/), with extra CLI flags; with `library`,
    an edition for every book in it (`--library`, as stack.toml passes the run's DB)."""
    argv = [PYTHON, "-m", "bookmeta", "--host", "127.0.0.1", "--port", "{port}", *extra]
    if library is not None:
        argv += ["--library", str(library)]
    return launch("bookmeta", argv, STACK / "upstream")


def start_app(
    launch: Launcher, workspace: Path, db_path: Path, upstream: Component, ttl_seconds: float = 300
) -> Component:
    """The API from `workspace` under gunicorn, after seeding `db_path` (unless seeded)."""
    seed_library(db_path, workspace)
    port = free_port()
    env = {
        "BOOKSHELF_PORT": str(port),
        "BOOKSHELF_DB_PATH": str(db_path),
        "BOOKSHELF_UPSTREAM_URL": upstream.url,
        "BOOKSHELF_CACHE_TTL_SECONDS": str(ttl_seconds),
    }
    argv = [PYTHON, "-m", "gunicorn", "-c", "gunicorn.conf.py", "bookshelf.wsgi:app"]
    return launch("bookshelf-api", argv, workspace, env, port)


def start_loadgen(
    launch: Launcher, target: Component, rate: float, *extra: str, truth_db: Path | None = None
) -> Component:
    """The load generator against `target`; `truth_db` is the library its answers are
    checked against (`--truth-db`, required by search-storm)."""
    argv = [
        PYTHON,
        "-m",
        "loadgen",
        "--target",
        target.url,
        "--rate",
        str(rate),
        "--port",
        "{port}",
        *extra,
    ]
    if truth_db is not None:
        argv += ["--truth-db", str(truth_db)]
    return launch("loadgen", argv, STACK / "loadgen")


def histogram_buckets(metrics_text: str, family: str) -> dict[float, float]:
    """Cumulative bucket counts of `family`, summed over all other labels."""
    buckets: dict[float, float] = {}
    pattern = re.compile(rf"^{family}_bucket\{{(.*)\}} (\S+)$", re.MULTILINE)
    for labels, value in pattern.findall(metrics_text):
        bound = re.search(r'le="([^"]+)"', labels)
        assert bound is not None
        le = float("inf") if bound.group(1) == "+Inf" else float(bound.group(1))
        buckets[le] = buckets.get(le, 0.0) + float(value)
    return buckets


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float:
    """`histogram_quantile(q, ...)` over the increase between two scrapes."""
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    bounds = sorted(delta)
    total = delta[bounds[-1]]
    assert total > 0, "no observations between the two scrapes"
    rank, lower, below = q * total, 0.0, 0.0
    for le in bounds:
        if delta[le] >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - below) / (delta[le] - below)
        lower, below = le, delta[le]
    return lower
