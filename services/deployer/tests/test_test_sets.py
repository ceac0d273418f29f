"""What the hand-off set restores, what it refuses, and how JUnit reports are read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sreforge_deployer.gate._gate import _kept_file_complaints
from sreforge_deployer.gate._test_sets import (
    MAX_JUNIT_BYTES,
    ChangedTests,
    JunitReport,
    handoff_complaints,
    is_test_path,
    plugin_hooks,
    read_junit,
    shadowing_modules,
)


@pytest.mark.parametrize(
    ("path", "restored"),
    [
        ("tests/test_x.py", True),
        ("tests/data/seed.json", True),
        ("tests", True),
        ("app/test/helpers.py", True),
        ("conftest.py", True),
        ("app/conftest.py", True),
        ("app/test_inline.py", True),
        ("app/inline_test.py", True),
        ("pytest.ini", True),
        (".pytest.ini", True),
        ("pyproject.toml", True),
        ("setup.cfg", True),
        ("tox.ini", True),
        ("app/pytest.ini", False),
        ("app/views.py", False),
        ("app/testing.py", False),
        ("README.md", False),
    ],
)
def test_test_paths_are_the_tests_their_config_and_every_conftest(
    path: str, restored: bool
) -> None:
    """Anything pytest reads to decide what runs and how is a test path."""
    assert is_test_path(path) is restored


def test_top_level_modules_that_shadow_the_runner_are_found() -> None:
    """pytest, its plugins, the standard library and startup hooks may not be replaced."""
    entries = [
        "pytest.py",
        "_pytest/__init__.py",
        "pluggy/__init__.py",
        "xml/__init__.py",
        "json.py",
        "sitecustomize.py",
        "app/json.py",
        "app/__init__.py",
        "tests/__init__.py",
        "logging/handlers.py",
        "README.md",
    ]
    assert shadowing_modules(entries) == [
        "_pytest",
        "json.py",
        "pluggy",
        "pytest.py",
        "sitecustomize.py",
        "xml",
    ]


def test_changed_node_ids_match_that_test_and_its_parameters_only() -> None:
    """`test_greeting` lists neither `test_greeting_keeps_the_name` nor other files."""
    changed = ChangedTests.from_entries(
        ["tests/test_r.py::test_greeting", "tests/test_c.py::TestCase::test_y", "tests/test_f.py"]
    )
    assert changed.may_fail("tests.test_r::test_greeting")
    assert changed.may_fail("tests.test_r::test_greeting[ada]")
    assert not changed.may_fail("tests.test_r::test_greeting_keeps_the_name")
    assert changed.may_fail("tests.test_c.TestCase::test_y")
    assert not changed.may_fail("tests.test_f::test_any"), "a listed file is kept, not excused"
    assert changed.may_change("tests.test_f::test_any")
    assert changed.may_change("tests.test_f.TestK::test_any")
    assert not changed.may_change("tests.test_ff::test_any")
    assert changed.keeps("tests/test_f.py")
    assert not changed.keeps("tests/test_r.py")


def test_junit_outcomes_are_read_per_case(tmp_path: Path) -> None:
    """Failures, errors, skips and xfails are told apart; a case seen twice keeps its worst."""
    report = tmp_path / "r.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="t.a" name="ok"/>'
        '<testcase classname="t.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="t.a" name="boom"><error message="x"/></testcase>'
        '<testcase classname="t.a" name="skip"><skipped type="pytest.skip"/></testcase>'
        '<testcase classname="t.a" name="xfail"><skipped type="pytest.xfail"/></testcase>'
        '<testcase classname="t.a" name="ok"><error message="teardown"/></testcase>'
        "</testsuite></testsuites>"
    )
    read = read_junit(report)
    assert read is not None
    assert read.cases == {
        "t.a::ok": "error",
        "t.a::bad": "failed",
        "t.a::boom": "error",
        "t.a::skip": "skipped",
        "t.a::xfail": "skipped",
    }


@pytest.mark.parametrize("text", ["", "not xml", "<html/>", "<testsuites><testcase>"])
def test_a_missing_or_foreign_report_is_none(tmp_path: Path, text: str) -> None:
    """Anything but a JUnit report reads as no report (red), never as zero failures."""
    report = tmp_path / "r.xml"
    report.write_text(text)
    assert read_junit(report) is None
    assert read_junit(tmp_path / "absent.xml") is None


def test_an_oversized_report_is_not_read(tmp_path: Path) -> None:
    """The code under test could write the report: a huge one is refused, not parsed."""
    report = tmp_path / "r.xml"
    with report.open("wb") as out:
        out.truncate(MAX_JUNIT_BYTES + 1)
    assert read_junit(report) is None


def test_hand_off_complaints_name_missing_and_newly_skipped_tests() -> None:
    """A base test that is gone or now skipped is named; one skipped at the base is not."""
    base = JunitReport({"t::a": "passed", "t::b": "failed", "t::c": "skipped", "t::d": "passed"})
    handoff = JunitReport({"t::a": "skipped", "t::b": "failed", "t::c": "skipped"})
    assert handoff_complaints(base, handoff) == [
        "the hand-off tests ran 3 test(s); the hand-off commit has 4",
        "t::a: skipped or xfailed (it ran at the hand-off commit)",
        "t::d: not run (it ran at the hand-off commit)",
    ]


def test_a_report_swapped_for_a_symlink_is_not_followed(tmp_path: Path) -> None:
    """The report lies in the tree the code under test can write: a link reads as none."""
    real = tmp_path / "real.xml"
    real.write_text(
        '<testsuites><testsuite><testcase classname="t" name="a"/></testsuite></testsuites>'
    )
    assert read_junit(real) is not None
    link = tmp_path / "r.xml"
    link.symlink_to(real)
    assert read_junit(link) is None


def test_plugin_hooks_in_a_test_module_are_named() -> None:
    """`pytest_plugins`, hook functions and hook imports are found; plain tests are not."""
    source = (
        "from x import pytest_runtest_makereport\n"
        "import pytest\n"
        "pytest_plugins = ['evil']\n"
        "def pytest_collection_modifyitems(items): pass\n"
        "def test_pytest_like_name(): pass\n"
    )
    assert plugin_hooks(source) == [
        "pytest_runtest_makereport",
        "pytest_plugins",
        "pytest_collection_modifyitems",
    ]
    assert plugin_hooks("def test_a():\n    assert True\n") == []
    assert plugin_hooks("def (:") == ["<unparsable>"]


@pytest.mark.timeout(10)
def test_a_report_swapped_for_a_fifo_reads_as_none_at_once(tmp_path: Path) -> None:
    """A FIFO at the report's name would hang the deployer's parse; it is no report."""
    os.mkfifo(tmp_path / "r.xml")
    assert read_junit(tmp_path / "r.xml") is None


def test_a_kept_test_file_reached_through_a_link_is_refused_unread(tmp_path: Path) -> None:
    """A changed test kept as submitted is read from the tree through no link: a linked
    file or folder is a complaint, and its target is never read."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_x.py").write_text("def pytest_configure(config): ...\n")
    (tree / "tests" / "test_x.py").symlink_to(outside / "test_x.py")
    (tree / "linked").symlink_to(outside)
    assert _kept_file_complaints(tree, "tests/test_x.py") == [
        "tests/test_x.py: test_x.py is a symbolic link, kept as submitted "
        "(a changed test must be a file)"
    ]
    assert _kept_file_complaints(tree, "linked/test_x.py")[0].startswith(
        "linked/test_x.py: linked is a symbolic link"
    )
    assert _kept_file_complaints(tree, "tests/absent.py") == []
