"""The CI gate and the auto-merge on a tiny real git repo with real pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sreforge_deployer import Workspace
from sreforge_deployer.gate import MERGE_MESSAGE, CiCheckout, merge_and_checkout
from sreforge_deployer.gate._ci import truncate
from sreforge_git import git_env

APP = """def double(x):
    return 2 * x
"""
TEST = """from app import double


def test_double():
    assert double(2) == 4
"""


def _git(repo: Path, *args: str) -> str:
    env = {**git_env(), "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.org"}
    env |= {"GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.org"}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A workspace repo with an app, its test, and one commit on main."""
    path = tmp_path / "workspace"
    path.mkdir()
    (path / "app.py").write_text(APP)
    (path / "test_app.py").write_text(TEST)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Add doubling")
    return path, _git(path, "rev-parse", "HEAD")


def _diff(repo: Path, edit: dict[str, str]) -> str:
    """The diff an agent would submit: edit files, diff against HEAD, restore."""
    for name, text in edit.items():
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "--binary", "HEAD") + "\n"
    _git(repo, "reset", "-q", "--hard")
    return diff


def test_green_submission_is_tested_on_a_clean_checkout_and_merged(
    repo: tuple[Path, str],
) -> None:
    """A passing change is green; the merge makes the workspace exactly the tested tree."""
    path, base = repo
    diff = _diff(path, {"app.py": APP + "\n\ndef triple(x):\n    return 3 * x\n"})
    (path / "stray.txt").write_text("left by the agent")
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 60, 10_000)
        assert gate.green, gate.output
        assert gate.exit_code == 0
        assert "1 passed" in gate.output
        assert gate.tree is not None
        commit = merge_and_checkout(checkout, gate.tree)
    workspace = Workspace(path)
    assert workspace.head() == commit
    assert workspace.git("log", "-1", "--format=%s%n%P") == f"{MERGE_MESSAGE}\n{base}"
    assert "def triple" in (path / "app.py").read_text()
    assert not (path / "stray.txt").exists(), "the deployed checkout holds only the commit"
    assert workspace.git("status", "--porcelain") == ""


def test_failing_tests_are_red_with_their_output(repo: tuple[Path, str]) -> None:
    """A change that breaks the app's tests is red and keeps pytest's output."""
    path, base = repo
    diff = _diff(path, {"app.py": "def double(x):\n    return x + 3\n"})
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 60, 10_000)
    assert not gate.green
    assert gate.exit_code == 1
    assert "test_double" in gate.output
    assert "1 failed" in gate.output


def test_a_diff_that_does_not_apply_is_red_with_gits_message(repo: tuple[Path, str]) -> None:
    """A patch against other content is red, says so, and runs no tests."""
    path, base = repo
    diff = _diff(path, {"app.py": "def double(x):\n    return x * 2\n"}).replace(
        "return 2 * x", "return 2 * y"
    )
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 60, 10_000)
    assert not gate.green
    assert gate.exit_code is None
    assert "does not apply" in gate.output
    assert "app.py" in gate.output


def test_tests_over_the_time_limit_are_red(repo: tuple[Path, str]) -> None:
    """A test run past the limit is killed and reported red with no exit code."""
    path, base = repo
    slow = TEST + "\n\ndef test_slow():\n    import time\n    time.sleep(30)\n"
    diff = _diff(path, {"test_app.py": slow})
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 3, 10_000)
    assert not gate.green
    assert gate.exit_code is None
    assert "did not finish within 3 s" in gate.output


def test_long_output_keeps_head_and_tail() -> None:
    """Truncation keeps both ends and says how much was cut."""
    text = "HEAD" + "x" * 5000 + "TAIL"
    cut = truncate(text, 1000)
    assert cut.startswith("HEAD")
    assert cut.endswith("TAIL")
    assert "characters cut" in cut
    assert len(cut) < 1100
    assert truncate("short", 1000) == "short"
