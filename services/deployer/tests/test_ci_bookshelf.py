"""The CI gate on the bookshelf scenario: its fix and negatives pass, a stand-in does not.

The workspace is built as a run builds it (the app's history, the fault delivered as a
recent commit); the gate gets the scenario's protection (`verify/ci/`, judged apart
from the submission, and the changed tests).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sreforge_deployer import DeployerSettings, Workspace
from sreforge_deployer.gate import CiCheckout, CiRun, ci_protection, judge_of

from .conftest import BOOKSHELF, REPO_ROOT, STAMPEDE

pytestmark = pytest.mark.timeout(300)

APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
FAULT = STAMPEDE / "inject" / "01-metadata-service-per-request.patch"
FORGED = REPO_ROOT / "tests" / "integrity" / "fixtures" / "forged-test-reports.patch"
LOOKUP = '    results = [{**book, "metadata": metadata.lookup(book["isbn"])} for book in books]\n'
# Hits carry only the fields the app's own tests look at: they pass, the upstream's
# answer no longer reaches the client unchanged.
STAND_IN = (
    '    fields = ("isbn", "title", "authors")\n'
    "    results = []\n"
    "    for book in books:\n"
    '        found = metadata.lookup(book["isbn"])\n'
    "        trimmed = None if found is None else {k: found[k] for k in fields if k in found}\n"
    '        results.append({**book, "metadata": trimmed})\n'
)


def _stand_in_diff(tmp_path: Path) -> str:
    """The search module with the stand-in, as a diff against the app's tree."""
    search = APP / "bookshelf" / "search.py"
    text = search.read_text()
    assert LOOKUP in text
    before, after = tmp_path / "a.py", tmp_path / "b.py"
    before.write_text(text)
    after.write_text(text.replace(LOOKUP, STAND_IN))
    done = subprocess.run(
        ["git", "diff", "--no-index", "--", str(before), str(after)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    body = done.stdout.split("\n@@", 1)[1]
    return f"--- a/bookshelf/search.py\n+++ b/bookshelf/search.py\n@@{body}"


def _gate(tmp_path: Path, diff: str) -> CiRun:
    workspace = Workspace.build(APP, tmp_path / "workspace")
    workspace.deliver_recent([FAULT])
    protection = ci_protection(BOOKSHELF.parent, STAMPEDE.name)
    judge = judge_of(DeployerSettings(use_cases=BOOKSHELF.parent), STAMPEDE.name)
    with CiCheckout(workspace.path, workspace.head()) as checkout:
        return checkout.run(diff, sys.executable, 120, 20_000, protection, judge)


@pytest.mark.parametrize(
    "patch",
    [
        STAMPEDE / "solution" / "fix.patch",
        *sorted((STAMPEDE / "verify" / "negative").glob("*.patch")),
    ],
    ids=lambda path: path.stem,
)
def test_the_fix_and_the_negatives_pass_all_three_sets(tmp_path: Path, patch: Path) -> None:
    """CI passes them all: telling the fix from the negatives is the oracle's job."""
    run = _gate(tmp_path, patch.read_text())
    assert run.green, run.output
    assert [ran.name for ran in run.test_sets] == ["submitted", "handoff", "hidden"]
    assert all(ran.passed > 0 and not ran.failed for ran in run.test_sets), run.test_sets


def _red_in_the_hidden_set_only(run: CiRun) -> None:
    """The tree's own sets green, the hidden set red on the enrichment test."""
    assert [(ran.name, ran.green) for ran in run.test_sets] == [
        ("submitted", True),
        ("handoff", True),
        ("hidden", False),
    ], run.output
    assert "test_each_hit_carries_the_metadata_service_answer_for_its_isbn" in run.output


def test_a_reshaped_upstream_answer_is_red_in_the_hidden_set(tmp_path: Path) -> None:
    """A change the hand-off tests do not see is caught by the scenario's hidden tests."""
    run = _gate(tmp_path, _stand_in_diff(tmp_path))
    _red_in_the_hidden_set_only(run)


def test_forged_test_reports_do_not_hide_the_reshaped_answer(tmp_path: Path) -> None:
    """The stand-in plus app code that turns every report of a pytest process it is
    imported into a pass: the sets run in the tree go green on its word, but the hidden
    set is judged in a process of its own, over HTTP, and stays red."""
    run = _gate(tmp_path, _stand_in_diff(tmp_path) + FORGED.read_text())
    _red_in_the_hidden_set_only(run)
