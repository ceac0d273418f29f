"""What the CI gate's test sets are made of and how they are judged; no subprocess here.

A test *path* is what the hand-off set restores from the base commit: anything under a
`tests/` or `test/` folder, any `conftest.py`, any `test_*.py`/`*_test.py`, and the test
configuration at the root (`pytest.ini`, `.pytest.ini`, `pyproject.toml`, `setup.cfg`,
`tox.ini`). Outcomes come from pytest's JUnit XML, keyed by `classname::name`.
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Literal

from sreforge_confine import UntrustedFileRefused, read_untrusted

__all__ = [
    "GRADED_SETS",
    "MAX_JUNIT_BYTES",
    "ChangedTests",
    "JunitReport",
    "Outcome",
    "SetName",
    "handoff_complaints",
    "is_test_path",
    "plugin_hooks",
    "read_junit",
    "shadowing_modules",
]

SetName = Literal["submitted", "handoff", "hidden", "fail_to_pass", "pass_to_pass"]
GRADED_SETS: frozenset[SetName] = frozenset({"fail_to_pass", "pass_to_pass"})
"""A patch scenario's hidden sets: reported test by test, graded by the oracle, never
deciding CI's own green."""
Outcome = Literal["passed", "failed", "skipped", "error"]
MAX_JUNIT_BYTES = 32 * 1024 * 1024
"""A bigger report is not read (the code under test may have written it)."""

_ROOT_TEST_CONFIG = frozenset(
    {"pytest.ini", ".pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}
)
_TEST_DIRS = frozenset({"tests", "test"})
_TEST_FILES = ("test_*.py", "*_test.py", "conftest.py")
# pytest runs as `python -m pytest` in the tree, so a module at its root is imported
# before the real runner, its plugins or the standard library.
_RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging"})
_STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def is_test_path(relative: str) -> bool:
    """Whether the hand-off set takes `relative` (a posix path) from the base commit."""
    parts = relative.split("/")
    if len(parts) == 1 and parts[0] in _ROOT_TEST_CONFIG:
        return True
    if any(part in _TEST_DIRS for part in parts[:-1]) or parts[-1] in _TEST_DIRS:
        return True
    return any(fnmatch(parts[-1], pattern) for pattern in _TEST_FILES)


def shadowing_modules(entries: Iterable[str]) -> list[str]:
    """Root-level modules or packages in `entries` that would stand in for the test runner.

    A top-level `pytest.py`, `_pytest/__init__.py`, `pluggy/`, a standard-library name
    (`xml/`, `json.py`) or `sitecustomize.py` runs instead of what CI means to run. The
    test folders are left out: the hand-off set takes them from the base.
    """
    shadowed = (_RUNNER_MODULES | _STARTUP_MODULES | sys.stdlib_module_names) - _TEST_DIRS
    found: set[str] = set()
    for entry in entries:
        parts = entry.split("/")
        if len(parts) == 1:
            name = parts[0]
            module = name.split(".", 1)[0] if name.endswith(_MODULE_SUFFIXES) else name
        elif len(parts) == 2 and parts[1].startswith("__init__."):
            module = parts[0]
        else:
            continue
        if module in shadowed:
            found.add(parts[0])
    return sorted(found)


def plugin_hooks(source: str) -> list[str]:
    """Top-level names in a test module that reach into pytest itself.

    A kept (changed) test file runs in the hand-off set as submitted; `pytest_plugins`
    or a `pytest_*` hook defined there would load or be code that rewrites the run.
    Unparsable source counts as one (pytest would not collect it as written either).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ["<unparsable>"]
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        else:
            continue
        found.extend(name for name in names if name.startswith("pytest_"))
    return found


@dataclass(frozen=True)
class ChangedTests:
    """The scenario's `ci_changed_tests`: whole files kept as submitted, node ids not held.

    A node id (`tests/test_x.py::TestY::test_z`) matches that test and its parametrized
    cases, nothing else; a file matches every test in it.
    """

    files: frozenset[str] = frozenset()
    node_ids: tuple[str, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> ChangedTests:
        """Split manifest entries into files (no `::`) and node ids."""
        listed = list(entries)
        files = frozenset(entry for entry in listed if "::" not in entry)
        return cls(files, tuple(entry for entry in listed if "::" in entry))

    def keeps(self, relative: str) -> bool:
        """Whether the hand-off set keeps the submitted version of `relative`."""
        return relative in self.files

    def may_change(self, key: str) -> bool:
        """Whether the base's case `key` need not run, or pass, in the hand-off set."""
        return self.may_fail(key) or any(
            key.startswith((f"{_module(path)}::", f"{_module(path)}.")) for path in self.files
        )

    def may_fail(self, key: str) -> bool:
        """Whether the hand-off set's case `key` is a listed node id (its base version)."""
        for node_id in self.node_ids:
            path, *names = node_id.split("::")
            classname = ".".join([_module(path), *names[:-1]])
            listed = f"{classname}::{names[-1]}"
            if key == listed or key.startswith(f"{listed}["):
                return True
        return False


def _module(path: str) -> str:
    """A test file's dotted name as pytest's JUnit `classname` spells it."""
    return path.removesuffix(".py").replace("/", ".")


@dataclass(frozen=True)
class JunitReport:
    """Each test case's outcome in one pytest run (`classname::name` → outcome)."""

    cases: dict[str, Outcome] = field(default_factory=dict)

    def count(self, outcome: Outcome) -> int:
        """How many cases ended with `outcome`."""
        return sum(1 for seen in self.cases.values() if seen == outcome)

    def without(self, drop: Callable[[str], bool]) -> JunitReport:
        """The report without the cases whose key `drop` selects."""
        return JunitReport({key: seen for key, seen in self.cases.items() if not drop(key)})


def read_junit(path: Path) -> JunitReport | None:
    """The report pytest wrote at `path`; None when absent, a symlink, too big or not JUnit."""
    try:
        # The code under test may have swapped the report for a link or a FIFO.
        data = read_untrusted(path.parent, path.name, cap=MAX_JUNIT_BYTES)
        root = ElementTree.fromstring(data)
    except (UntrustedFileRefused, ElementTree.ParseError):
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    cases: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        cases[key] = _worst(cases.get(key), _outcome(case))
    return JunitReport(cases)


def handoff_complaints(base: JunitReport, handoff: JunitReport) -> list[str]:
    """Why the hand-off set ran less than the base did: missing or newly skipped tests."""
    complaints: list[str] = []
    if len(handoff.cases) < len(base.cases):
        complaints.append(
            f"the hand-off tests ran {len(handoff.cases)} test(s); "
            f"the hand-off commit has {len(base.cases)}"
        )
    for key, was in sorted(base.cases.items()):
        now = handoff.cases.get(key)
        if now is None:
            complaints.append(f"{key}: not run (it ran at the hand-off commit)")
        elif now == "skipped" and was != "skipped":
            complaints.append(f"{key}: skipped or xfailed (it ran at the hand-off commit)")
    return complaints


_RANK: dict[Outcome, int] = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def _outcome(case: ElementTree.Element) -> Outcome:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"


def _worst(seen: Outcome | None, new: Outcome) -> Outcome:
    """A case reported twice (a teardown error after a pass) keeps its worse outcome."""
    if seen is None or _RANK[new] > _RANK[seen]:
        return new
    return seen
