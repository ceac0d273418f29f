"""The app's own suite (what the CI gate runs) on the healthy, faulted and fixed trees."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from .conftest import FIX_PATCH, NEGATIVE_PATCH, PYTHON, app_repo, git

SUITE_BUDGET_SECONDS = 30


def _run_suite(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("faulted", "patch"),
    [(False, None), (True, None), (True, FIX_PATCH), (True, NEGATIVE_PATCH)],
    ids=["healthy", "faulted", "fixed", "negative"],
)
def test_app_suite_passes_quickly(tmp_path: Path, faulted: bool, patch: Path | None) -> None:
    """The suite is green on every tree: the fault is a performance regression CI cannot see,
    and neither the reference fix nor the negative fixture is rejected by CI."""
    repo = app_repo(tmp_path / "app", faulted=faulted, patch=patch)
    started = time.monotonic()
    done = _run_suite(repo)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, f"app suite failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout
    assert elapsed < SUITE_BUDGET_SECONDS, f"app suite took {elapsed:.1f}s"


def test_fault_arrives_as_one_authored_commit(tmp_path: Path) -> None:
    """`git am` turns the inject patch into one commit with a person's name and a message
    that reads like routine work, touching only the metadata wiring."""
    repo = app_repo(tmp_path / "app", faulted=True)
    log = git(repo, "log", "-1", "--format=%an <%ae>%n%s")
    author, subject = log.strip().splitlines()
    assert author == "Jonah Lindqvist <jonah.lindqvist@proton.me>"
    assert subject.startswith("search: ")
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        "bookshelf/metadata.py"
    ]


def test_fix_and_negative_both_apply_to_the_faulted_tree(tmp_path: Path) -> None:
    """Both fixtures are plain diffs against the faulted main."""
    repo = app_repo(tmp_path / "app", faulted=True)
    for patch in (FIX_PATCH, NEGATIVE_PATCH):
        git(repo, "apply", "--check", str(patch))


def test_fix_restores_the_healthy_metadata_wiring(tmp_path: Path) -> None:
    """The reference fix is the refactor's code change undone."""
    fixed = app_repo(tmp_path / "fixed", faulted=True, patch=FIX_PATCH)
    healthy = app_repo(tmp_path / "healthy")
    relative = Path("bookshelf/metadata.py")
    assert (fixed / relative).read_text() == (healthy / relative).read_text()
