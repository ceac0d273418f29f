"""The hand-off tree's own tests learned once per tree: later gates read the kept report."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from sreforge_deployer.gate import CiProtection
from sreforge_deployer.gate._base_reports import BaseReports
from sreforge_deployer.gate._gate import KnownBase, run_test_sets
from sreforge_deployer.gate._test_sets import JunitReport

TESTS = "def test_one():\n    assert True\n\ndef test_two():\n    assert 1 + 1 == 2\n"


class Runner:
    """pytest, unconfined, on a set's copy; counts the runs on the base's copy."""

    def __init__(self) -> None:
        self.base_runs = 0

    def __call__(self, cwd: Path, extra: Sequence[str]) -> tuple[int | None, str]:
        """Run pytest in `cwd` with `extra`; its exit code and output."""
        if cwd.name == "base":
            self.base_runs += 1
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout + done.stderr


def tree(root: Path, tests: str = TESTS) -> Path:
    """A tree with one test module."""
    root.mkdir(parents=True)
    (root / "test_app.py").write_text(tests)
    return root


def gate(tmp_path: Path, name: str, runner: Runner, known: KnownBase | None) -> bool:
    """One gate of the submitted tree = base; green or not."""
    base = tree(tmp_path / name / "base-tree")
    work = tmp_path / name / "work"
    work.mkdir()
    sets = run_test_sets(base, base, work, runner, CiProtection(), None, known)
    return all(ran.green for ran in sets) and [ran.name for ran in sets] == [
        "submitted",
        "handoff",
    ]


@pytest.mark.timeout(120)
def test_a_second_gate_on_the_same_base_tree_reads_the_kept_report(tmp_path: Path) -> None:
    """The first gate learns the base and keeps its report; the second reads it, runs the
    base's tests no more, and still runs the hand-off set against it."""
    reports = BaseReports(tmp_path / "ci-base")
    known = KnownBase(reports, BaseReports.key_for("tree-1", sys.executable, "bwrap"))
    runner = Runner()
    assert gate(tmp_path, "first", runner, known)
    assert runner.base_runs == 1
    kept = reports.read(known.key)
    assert kept is not None
    assert sorted(kept.cases.values()) == ["passed", "passed"]
    assert gate(tmp_path, "second", runner, known)
    assert runner.base_runs == 1
    assert gate(tmp_path, "unkept", runner, None)
    assert runner.base_runs == 2


def test_the_key_names_the_tree_the_interpreter_and_the_jail() -> None:
    """Another tree, interpreter or jail is another report."""
    key = BaseReports.key_for("tree-1", "/venv/bin/python", "bwrap")
    assert key != BaseReports.key_for("tree-2", "/venv/bin/python", "bwrap")
    assert key != BaseReports.key_for("tree-1", "/other/bin/python", "bwrap")
    assert key != BaseReports.key_for("tree-1", "/venv/bin/python", "none")


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"test_app::test_one": "won"}', '{"a": 1}']
)
def test_a_kept_report_that_is_not_one_is_learned_again(tmp_path: Path, text: str) -> None:
    """A damaged or foreign file under the key reads as no report (the gate learns anew)."""
    reports = BaseReports(tmp_path)
    (tmp_path / "k.json").write_text(text)
    assert reports.read("k") is None
    reports.keep("k", JunitReport({"test_app::test_one": "failed"}))
    assert reports.read("k") == JunitReport({"test_app::test_one": "failed"})
