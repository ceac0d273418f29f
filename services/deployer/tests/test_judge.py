"""The graded sets' judge on the bookshelf patch scenario: real pytest, real gunicorn, jailed.

The hidden tests run in a process of their own and reach the submission only over HTTP,
so nothing the submission does to a pytest process it shares (none here) changes a
graded outcome; a judge cut short or a service that answers too much costs the
submission its tests, never the judge its memory or the machine a stray service.
"""

from __future__ import annotations

import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sreforge_contracts import RunRequested
from sreforge_deployer import DeployerSettings
from sreforge_deployer._patch import PatchTopology
from sreforge_deployer._process import groups_members
from sreforge_deployer.gate import CiCheckout, CiRun, SetOutcome, ci_protection, judge_for, judge_of

from .conftest import BOOKSHELF, REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SCENARIO = "patch-stale-sort-keys"
SCENARIO_DIR = BOOKSHELF / "scenarios" / SCENARIO
APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
FORGED = REPO_ROOT / "tests" / "integrity" / "fixtures" / "forged-test-reports.patch"
DAEMON = """
import os

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{marker}"])
    os._exit(0)
"""
HIDDEN_SEES_DAEMON = """
from pathlib import Path


def test_daemon_runs(service):
    assert service.get("/healthz").status_code == 200
    wanted = b"sleep\\x00{marker}\\x00"
    seen = []
    for entry in Path("/proc").iterdir():
        try:
            seen.append((entry / "cmdline").read_bytes())
        except OSError:
            continue
    assert wanted in seen
"""
HUGE_ROUTE = """

@app.get("/huge")
def _huge() -> str:
    return "x" * (9 * 1024 * 1024)
"""


@pytest.fixture(scope="module")
def base(settings: DeployerSettings) -> Iterator[tuple[Path, str]]:
    """A patch run's workspace at the scenario's base commit (torn down after)."""
    event = RunRequested(
        run_id="judge-base",
        producer="correlator",
        scenario=SCENARIO,
        agent="noop",
        time_scale=0.1,
        alert_route="0f3a9c2e7b1d4a6f8e0c2b4d6f8a1c3e",
    )
    topology = PatchTopology.open(event, settings)
    topology.up()
    topology.arm()
    target = topology.ci_target()
    assert target is not None
    try:
        yield target.workspace, target.base_commit
    finally:
        topology.down()


def _gate(settings: DeployerSettings, base: tuple[Path, str], diff: str) -> dict[str, SetOutcome]:
    protection = ci_protection(settings.use_cases, SCENARIO)
    with CiCheckout(*base) as checkout:
        run: CiRun = checkout.run(
            diff, settings.python, 240, 20_000, protection, judge_of(settings, SCENARIO)
        )
    assert run.green, run.output
    return {ran.name: ran for ran in run.test_sets}


def test_the_reference_fix_passes_every_graded_test(
    settings: DeployerSettings, base: tuple[Path, str]
) -> None:
    """The scenario's fix, judged over HTTP: 5 fail-to-pass and 6 pass-to-pass passed."""
    sets = _gate(settings, base, (SCENARIO_DIR / "solution" / "fix.patch").read_text())
    assert len(sets["fail_to_pass"].passed_tests) == 5, sets["fail_to_pass"].output
    assert sets["fail_to_pass"].failed_tests == ()
    assert len(sets["pass_to_pass"].passed_tests) == 6, sets["pass_to_pass"].output


def test_forged_test_reports_do_not_reach_the_graded_sets(
    settings: DeployerSettings, base: tuple[Path, str]
) -> None:
    """App code that turns every report of a pytest process it is imported into a pass
    (it fools a suite run in-process: CI's own sets stay green) leaves the bug, and each
    fail-to-pass test judged apart fails."""
    sets = _gate(settings, base, FORGED.read_text())
    assert sets["handoff"].green
    assert sets["fail_to_pass"].passed_tests == ()
    assert len(sets["fail_to_pass"].failed_tests) == 5, sets["fail_to_pass"].output


def _judged(
    tmp_path: Path, settings: DeployerSettings, tests: str, timeout_s: float = 120
) -> tuple[int | None, str, dict[str, str], Path]:
    """The hidden `tests` judged against the app's tree (doctored by the caller first)."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden.py").write_text(tests)
    place = tmp_path / "place"
    place.mkdir()
    judge = judge_for(
        SCENARIO_DIR,
        python=settings.python,
        bwrap_path=settings.bwrap_path,
        port_lock_dir=settings.port_lock_dir,
        port_range=(settings.port_range_low, settings.port_range_high),
        timeout_s=timeout_s,
    )
    code, output, report = judge("fail_to_pass", tmp_path / "tree", hidden, place)
    return code, output, dict(report.cases) if report else {}, place


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(APP, tree)
    return tree


def test_a_judge_cut_short_leaves_no_service_running(
    tmp_path: Path, settings: DeployerSettings
) -> None:
    """A hidden test still running at the set's timeout: the judge is killed, and the
    service it had started (in a session of its own) is stopped too."""
    _tree(tmp_path)
    tests = "import time\n\ndef test_slow(service):\n    time.sleep(120)\n"
    code, output, _, place = _judged(tmp_path, settings, tests, timeout_s=20)
    assert code is None, output
    pgids = [int(line) for line in (place / "pgids").read_text().split()]
    assert pgids
    assert not any(groups_members(pgids).values())


def test_the_judge_imports_nothing_of_the_submission(
    tmp_path: Path, settings: DeployerSettings
) -> None:
    """A root `conftest.py`, `sitecustomize.py` and `pytest.py` in the submitted tree would
    run first in a pytest process in the tree: none runs in the judge's."""
    tree = _tree(tmp_path)
    marker = tmp_path / "imported"
    for name in ("conftest.py", "sitecustomize.py", "pytest.py", "_pytest.py"):
        (tree / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    tests = "def test_up(service):\n    assert service.get('/healthz').status_code == 200\n"
    code, output, cases, _ = _judged(tmp_path, settings, tests)
    assert code == 0, output
    assert cases == {"fail_to_pass.test_hidden::test_up": "passed"}
    assert not marker.exists(), marker.read_text()


def test_an_oversized_answer_fails_only_the_test_that_asked(
    tmp_path: Path, settings: DeployerSettings
) -> None:
    """A 9 MB answer is refused past the judge's cap: that test fails, the next passes."""
    tree = _tree(tmp_path)
    wsgi = tree / "bookshelf" / "wsgi.py"
    wsgi.write_text(wsgi.read_text() + HUGE_ROUTE)
    tests = (
        "def test_huge(service):\n    service.get('/huge')\n\n"
        "def test_up(service):\n    assert service.get('/healthz').status_code == 200\n"
    )
    code, output, cases, _ = _judged(tmp_path, settings, tests)
    assert code == 1, output
    assert cases == {
        "fail_to_pass.test_hidden::test_huge": "failed",
        "fail_to_pass.test_hidden::test_up": "passed",
    }
    assert "answered over" in output
    assert sys.getsizeof(output) < 4 * 1024 * 1024


def test_a_service_that_daemonizes_leaves_nothing_behind_the_judge(
    tmp_path: Path, settings: DeployerSettings
) -> None:
    """A submitted service that double-forks a detached process of its own (new session,
    parent gone) when it starts: the hidden test sees it running, and once the judge is
    done none of it is left."""
    tree = _tree(tmp_path)
    marker = f"{4000 + secrets.randbelow(1000)}.{secrets.randbelow(10**6)}"
    wsgi = tree / "bookshelf" / "wsgi.py"
    wsgi.write_text(wsgi.read_text() + DAEMON.format(marker=marker))
    tests = HIDDEN_SEES_DAEMON.format(marker=marker)
    code, output, cases, _ = _judged(tmp_path, settings, tests)
    assert code == 0, output
    assert cases == {"fail_to_pass.test_hidden::test_daemon_runs": "passed"}
    assert _running(["sleep", marker]) == [], "the service's detached process outlived the judge"


def _running(argv: list[str]) -> list[int]:
    """Host pids whose command line is `argv`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # not a process, or gone meanwhile
            continue
        if cmdline.split(b"\0")[:-1] == [arg.encode() for arg in argv]:
            found.append(int(entry.name))
    return found
