"""The CI gate's test sets: the tests as submitted, the hand-off tests, the hidden tests.

Each set runs in its own copy of the submitted tree, pytest writing its JUnit XML into
that copy under a fresh name (see `_pytest`). The base commit's own tests are run once
per gate (in a copy of the base tree, with the base's configuration) to learn which
tests exist and which ran there; the hand-off set must run each of them again, none
skipped that ran. The first red set ends the gate: the verdict is decided and the rest
would only cost time. The scenario's sets (`hidden`, from `verify/ci/`, and a patch
scenario's graded sets) are not run in the tree at all: a `Judge` (`_judge`) runs them in
a process of their own against the submission served, so nothing the submission does to
a pytest process changes them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sreforge_confine import UntrustedFileMissing, UntrustedFileRefused, read_untrusted

from sreforge_deployer._errors import WorkspaceError
from sreforge_deployer.gate._base_reports import BaseReports
from sreforge_deployer.gate._judge import Judge
from sreforge_deployer.gate._test_sets import (
    ChangedTests,
    JunitReport,
    SetName,
    handoff_complaints,
    plugin_hooks,
    read_junit,
    shadowing_modules,
)
from sreforge_deployer.gate._test_trees import (
    copy_tree,
    restore_handoff,
    tree_entries,
)

__all__ = ["NO_TESTS", "CiProtection", "KnownBase", "SetOutcome", "SetRunner", "run_test_sets"]

SetRunner = Callable[[Path, Sequence[str]], tuple[int | None, str]]
"""(tree, extra pytest args) → (exit code, or None when it timed out; output)."""

NO_TESTS = 5
"""pytest's exit code when it collected nothing: red for every set."""
_BASE_USABLE = frozenset({0, 1, NO_TESTS})
_MAX_KEPT_BYTES = 1024 * 1024
_TITLES: dict[SetName, str] = {
    "submitted": "the tests as submitted",
    "handoff": "the hand-off commit's tests against the submitted code",
    "hidden": "the scenario's hidden tests against the submitted code",
    "fail_to_pass": "the scenario's fail-to-pass tests against the submitted code",
    "pass_to_pass": "the scenario's pass-to-pass tests against the submitted code",
}


@dataclass(frozen=True)
class KnownBase:
    """Where a gate's base report is kept (`BaseReports`) and under which key."""

    reports: BaseReports
    key: str


@dataclass(frozen=True)
class CiProtection:
    """What a scenario adds to the gate: hidden tests, hand-off tests a fix may change."""

    hidden_dir: Path | None = None
    changed: ChangedTests = field(default_factory=ChangedTests)
    graded: tuple[tuple[SetName, Path], ...] = ()
    """A patch scenario's graded sets (`fail_to_pass`, `pass_to_pass`) and their folders:
    judged, each in full, once CI's own sets are green; they never make CI red."""


@dataclass(frozen=True)
class SetOutcome:
    """One set's outcome: pytest's exit code and counts, and why it is red beyond them."""

    name: SetName
    green: bool
    exit_code: int | None
    output: str
    duration_ms: float
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    complaints: tuple[str, ...] = ()
    passed_tests: tuple[str, ...] = ()
    """A graded set's passed tests (JUnit `classname::name`); empty for the others."""
    failed_tests: tuple[str, ...] = ()
    """A graded set's tests that failed, errored or were skipped."""

    def header(self) -> str:
        """A banner naming the set, its verdict and counts, then each complaint."""
        verdict = "green" if self.green else "red"
        counts = (
            f"{self.passed} passed, {self.failed} failed, "
            f"{self.skipped} skipped, {self.errors} errors"
        )
        lines = [f"===== CI test set {self.name}: {_TITLES[self.name]}: {verdict} ({counts}) ====="]
        lines.extend(f"red: {complaint}" for complaint in self.complaints)
        return "\n".join(lines)


def run_test_sets(
    submitted: Path,
    base: Path,
    work: Path,
    runner: SetRunner,
    protection: CiProtection,
    judge: Judge | None = None,
    known: KnownBase | None = None,
) -> list[SetOutcome]:
    """Run the sets in order against `submitted` (a pristine tree) until one is red.

    `base` is the pristine base tree; `work` an empty folder outside both for the
    copies; `judge` runs the hidden and graded sets (required when there are any);
    `known` where the base's report is kept once learned (and read instead of learning).
    Raises `WorkspaceError` when the base's own tests cannot be run (an engine fault:
    the gate has nothing to compare against).
    """
    hidden = (
        protection.hidden_dir if protection.hidden_dir and protection.hidden_dir.is_dir() else None
    )
    if (hidden is not None or protection.graded) and judge is None:
        raise WorkspaceError("CI: a scenario's hidden and graded sets need a judge")
    sets = [_run_set("submitted", _copy(submitted, work, "submitted"), runner, ())[0]]
    if not sets[-1].green:
        return sets
    learned = _learn_base(base, work, runner, known).without(protection.changed.may_change)
    if learned.cases:
        sets.append(_handoff_set(submitted, base, work, runner, protection, learned))
        if not sets[-1].green:
            return sets
    if hidden is not None:
        assert judge is not None
        sets.append(_judged_set("hidden", submitted, work, judge, hidden)[0])
        if not sets[-1].green:
            return sets
    for name, folder in protection.graded:
        assert judge is not None
        sets.append(_graded_set(name, submitted, work, judge, folder))
    return sets


def _judged_set(
    name: SetName, submitted: Path, work: Path, judge: Judge, folder: Path
) -> tuple[SetOutcome, JunitReport | None]:
    """A scenario's hidden tests in `folder`, judged apart from the submission."""
    started = time.monotonic()
    place = work / "judged" / name
    place.mkdir(parents=True)
    code, output, report = judge(name, submitted, folder, place)
    return _judged(name, code, output, report, started), report


def _graded_set(
    name: SetName, submitted: Path, work: Path, judge: Judge, folder: Path
) -> SetOutcome:
    """A graded set, judged, with each test's outcome kept."""
    done, report = _judged_set(name, submitted, work, judge, folder)
    cases = report.cases if report is not None else {}
    passed = tuple(sorted(_graded_id(key, name) for key, seen in cases.items() if seen == "passed"))
    failed = tuple(sorted(_graded_id(key, name) for key, seen in cases.items() if seen != "passed"))
    return replace(done, passed_tests=passed, failed_tests=failed)


def _graded_id(key: str, where: str) -> str:
    """A JUnit key of a judged test without the folder it was judged in."""
    prefix = where.replace("/", ".") + "."
    return key.removeprefix(prefix)


def _handoff_set(
    submitted: Path,
    base: Path,
    work: Path,
    runner: SetRunner,
    protection: CiProtection,
    learned: JunitReport,
) -> SetOutcome:
    tree = _copy(submitted, work, "handoff")
    complaints = _protected_tree(tree, base, protection.changed)
    done, held = _run_set("handoff", tree, runner, (), complaints, protection.changed.may_fail)
    if held is None:
        return done
    return _with_complaints(done, handoff_complaints(learned, held))


def _protected_tree(tree: Path, base: Path, changed: ChangedTests) -> list[str]:
    """Put the hand-off tests back in `tree`; what makes the set red before it runs."""
    complaints = restore_handoff(tree, base, changed)
    base_names = set(shadowing_modules(tree_entries(base)))
    for name in shadowing_modules(tree_entries(tree)):
        if name not in base_names:
            complaints.append(f"{name}: a top-level module that stands in for the test runner")
    for kept in sorted(changed.files):
        complaints.extend(_kept_file_complaints(tree, kept))
    return complaints


def _kept_file_complaints(tree: Path, kept: str) -> list[str]:
    """A changed test file kept as submitted must be a plain test module."""
    try:
        text = read_untrusted(tree, kept, cap=_MAX_KEPT_BYTES).decode(errors="replace")
    except UntrustedFileMissing:
        return []
    except UntrustedFileRefused as refused:
        return [f"{kept}: {refused.reason}, kept as submitted (a changed test must be a file)"]
    hooks = plugin_hooks(text)
    return [f"{kept}: defines {name}, which reaches into pytest itself" for name in hooks]


def _learn_base(
    base: Path, work: Path, runner: SetRunner, known: KnownBase | None = None
) -> JunitReport:
    """The base's tests and how each ended there (`known`'s, when it has them)."""
    if known is not None:
        kept = known.reports.read(known.key)
        if kept is not None:
            return kept
    code, output, report = _pytest(_copy(base, work, "base"), runner, ())
    if code not in _BASE_USABLE or report is None:
        raise WorkspaceError(
            f"CI: the hand-off commit's own tests did not run (exit {code}); "
            f"nothing to hold the submission to:\n{output[-2000:]}"
        )
    if known is not None:
        known.reports.keep(known.key, report)
    return report


def _run_set(
    name: SetName,
    tree: Path,
    runner: SetRunner,
    extra: Sequence[str],
    complaints: Sequence[str] = (),
    may_fail: Callable[[str], bool] | None = None,
) -> tuple[SetOutcome, JunitReport | None]:
    """Run pytest on `tree`: green on exit 0, or on exit 1 when only `may_fail` cases failed.

    `complaints` (the tree could not be made what the set means to test) make it red
    without running: a run on that tree would prove nothing. Also returns the report,
    the `may_fail` cases left out.
    """
    started = time.monotonic()
    if complaints:
        refused = SetOutcome(name, False, None, "", _ms_since(started), complaints=(*complaints,))
        return refused, None
    code, output, report = _pytest(tree, runner, extra)
    done = _judged(name, code, output, report, started, may_fail)
    if report is not None and may_fail is not None:
        report = report.without(may_fail)
    return done, report


def _judged(
    name: SetName,
    code: int | None,
    output: str,
    report: JunitReport | None,
    started: float,
    may_fail: Callable[[str], bool] | None = None,
) -> SetOutcome:
    """A set's outcome from pytest's exit code and JUnit report."""
    excused = 0
    if report is not None and may_fail is not None:
        held = report.without(may_fail)
        excused = len(report.cases) - len(held.cases)
        report = held
    found: list[str] = []
    if code == NO_TESTS:
        found.append("no tests ran (pytest exit 5)")
    elif code is not None and report is None:
        found.append("pytest wrote no JUnit report (was the junitxml plugin disabled?)")
    elif report is not None and code is not None and not report.cases:
        found.append("the JUnit report lists no tests")
    only_excused = (
        code == 1
        and excused > 0
        and report is not None
        and not report.count("failed") + report.count("error")
    )
    green = (code == 0 or only_excused) and not found
    if excused:
        output = f"[{excused} test(s) the scenario lets a fix change were not held]\n{output}"
    counts = _counts(report)
    return SetOutcome(
        name, green, code, output, _ms_since(started), *counts, complaints=tuple(found)
    )


def _pytest(
    tree: Path, runner: SetRunner, extra: Sequence[str]
) -> tuple[int | None, str, JunitReport | None]:
    """One pytest run in `tree`, its JUnit report written inside it under a fresh name.

    Inside, because the tree is the only place a confined run may write; relative, so it
    holds wherever the confinement mounts the tree. The code under test could rewrite
    the report wherever it was (it shares the process), and the tree is thrown away.
    """
    name = f".ci-junit-{secrets.token_hex(8)}.xml"
    code, output = runner(tree, [f"--junitxml={name}", *extra])
    return code, output, read_junit(tree / name)


def _with_complaints(done: SetOutcome, complaints: list[str]) -> SetOutcome:
    if not complaints:
        return done
    return SetOutcome(
        done.name,
        False,
        done.exit_code,
        done.output,
        done.duration_ms,
        done.passed,
        done.failed,
        done.skipped,
        done.errors,
        (*done.complaints, *complaints),
    )


def _counts(report: JunitReport | None) -> tuple[int, int, int, int]:
    if report is None:
        return 0, 0, 0, 0
    return (
        report.count("passed"),
        report.count("failed"),
        report.count("skipped"),
        report.count("error"),
    )


def _copy(source: Path, work: Path, name: str) -> Path:
    dest = work / "sets" / name
    copy_tree(source, dest)
    return dest


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000
