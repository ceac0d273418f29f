"""patch-stale-sort-keys on the app itself: base commit, hidden sets, fix and negatives.

No engine: the workspace is built as the deployer builds it, and the hidden sets are
judged against each tree served, as the CI gate judges them (the whole runs are `sreforge run
patch-stale-sort-keys`). What the scenario claims: its pinned `base_commit` is the
built workspace's HEAD; every fail-to-pass test fails on it and passes with the
reference fix; the pass-to-pass set passes on both; each negative leaves a
fail-to-pass test failing while the app's own suite stays green.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario
from sreforge_deployer._workspace import Workspace
from sreforge_deployer.gate._test_sets import SetName

from .conftest import PYTHON, STACK, USE_CASE, judged

SCENARIO = USE_CASE / "scenarios" / "patch-stale-sort-keys"
FIX = SCENARIO / "solution" / "fix.patch"
F2P_TESTS = 5
"""The fail-to-pass set's size: each of them must fail on the base."""
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace as a patch run gets it."""
    dest = tmp_path_factory.mktemp("patch") / "workspace"
    patches = sorted((SCENARIO / "inject").glob("*.patch"))
    Workspace.build((STACK / "app").resolve(), dest, baked_patches=[p.resolve() for p in patches])
    return dest


def _tree(base: Path, tmp_path: Path, patch: Path | None) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(base, tree)
    if patch is not None:
        subprocess.run(["git", "apply", str(patch.resolve())], cwd=tree, check=True)
    return tree


def _failures(tree: Path, hidden: Path | None) -> int:
    """Tests not passed: the app's own suite in the tree (no `hidden`), or one hidden set
    judged against the tree served, as the CI gate judges it."""
    if hidden is not None:
        name: SetName = "fail_to_pass" if hidden.name == "fail_to_pass" else "pass_to_pass"
        report = judged(tree, SCENARIO, name, hidden)
        return report.count("failed") + report.count("error")
    args = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(args, cwd=tree, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    return sum(
        int(word)
        for word, kind in zip(line.split(), line.split()[1:], strict=False)
        if kind.startswith(("failed", "error"))
    )


def test_base_commit_is_the_built_workspace_head(base: Path) -> None:
    """A changed app/ or history moves the HEAD: re-pin base_commit to the printed id."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=base, capture_output=True, text=True)
    assert load_scenario(SCENARIO).manifest.base_commit == head.stdout.strip(), (
        f"re-pin base_commit to {head.stdout.strip()}"
    )


def test_fail_to_pass_fails_on_base_and_passes_with_the_fix(base: Path, tmp_path: Path) -> None:
    """Every fail-to-pass test is red on the base and green with the reference fix."""
    f2p = SCENARIO / "verify" / "fail_to_pass"
    on_base = _tree(base, tmp_path / "base", None)
    assert _failures(on_base, f2p) == F2P_TESTS
    fixed = _tree(base, tmp_path / "fix", FIX)
    assert _failures(fixed, f2p) == 0
    assert _failures(fixed, SCENARIO / "verify" / "pass_to_pass") == 0
    assert _failures(fixed, None) == 0


def test_pass_to_pass_passes_on_base(base: Path, tmp_path: Path) -> None:
    """The pass-to-pass set and the app's own suite are green on the base commit."""
    tree = _tree(base, tmp_path, None)
    assert _failures(tree, SCENARIO / "verify" / "pass_to_pass") == 0
    assert _failures(tree, None) == 0


@pytest.mark.parametrize("negative", NEGATIVES, ids=lambda path: path.stem)
def test_each_negative_keeps_ci_green_but_fails_a_hidden_test(
    base: Path, tmp_path: Path, negative: Path
) -> None:
    """A lazy fix passes the app's own suite yet leaves a fail-to-pass test failing."""
    tree = _tree(base, tmp_path, negative)
    assert _failures(tree, None) == 0
    assert _failures(tree, SCENARIO / "verify" / "fail_to_pass") > 0
