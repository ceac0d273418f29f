"""Delivery modes: which inject patches are baked in, which arrive at arm, which env."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sreforge_deployer import Workspace
from sreforge_deployer._delivery import baked_patches, deliver_at_arm
from sreforge_deployer._history import SETUP_BAKED_TAIL

from .conftest import BOOKSHELF_APP as APP
from .conftest import scenario_setup


def _subjects(workspace: Workspace) -> list[str]:
    return workspace.git("log", "--format=%s").splitlines()


def test_runtime_notrace_bakes_all_but_the_last_patch(series: list[Path], tmp_path: Path) -> None:
    """arm-runtime-notrace: the feature is old history; the innocent deploy is not baked."""
    setup = scenario_setup("arm-runtime-notrace", series, tmp_path)
    assert baked_patches(setup) == series[:1]
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=baked_patches(setup))
    subjects = _subjects(workspace)
    assert subjects.index("Add an in-flight limit setting") == SETUP_BAKED_TAIL
    assert "Name the minimum query length" not in subjects


def test_runtime_notrace_arms_the_innocent_deploy_now_and_the_override(
    series: list[Path], tmp_path: Path
) -> None:
    """At arm: the last patch becomes the latest commit, dated now; the env carries the fault."""
    setup = scenario_setup("arm-runtime-notrace", series, tmp_path)
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=baked_patches(setup))
    built = workspace.head()
    delivery = deliver_at_arm(setup, workspace, built=built)
    assert delivery.restart
    assert delivery.runtime_env == {"BOOKSHELF_MAX_INFLIGHT": "0"}
    assert delivery.fault_commit == workspace.head() != built
    assert _subjects(workspace)[0] == "Name the minimum query length"
    dated = datetime.fromisoformat(workspace.git("log", "-1", "--format=%cI"))
    assert abs(datetime.now(UTC) - dated) < timedelta(minutes=5)
    assert "BOOKSHELF_MAX_INFLIGHT" not in workspace.git("log", "-p", "--all")
    again = deliver_at_arm(setup, workspace, built=built)
    assert again.fault_commit == delivery.fault_commit, "an adopted re-arm mints nothing new"
    assert again.runtime_env == delivery.runtime_env


def test_runtime_notrace_without_patches_changes_only_the_env(tmp_path: Path) -> None:
    """No inject patch: nothing baked, nothing committed, the override and a restart."""
    setup = scenario_setup("arm-runtime-notrace", [], tmp_path)
    workspace = Workspace.build(APP, tmp_path / "ws")
    head = workspace.head()
    delivery = deliver_at_arm(setup, workspace, built=head)
    assert (delivery.fault_commit, delivery.restart) == (None, True)
    assert delivery.runtime_env == {"BOOKSHELF_MAX_INFLIGHT": "0"}
    assert workspace.head() == head


def test_other_modes_keep_their_split(series: list[Path], tmp_path: Path) -> None:
    """setup-baked bakes every patch; the recent modes bake none and carry no env."""
    assert baked_patches(scenario_setup("setup-baked", series, tmp_path)) == series
    for mode in ("arm-deploy-recent", "multi-commit"):
        setup = scenario_setup(mode, series, tmp_path)
        assert baked_patches(setup) == []
        workspace = Workspace.build(APP, tmp_path / mode)
        delivery = deliver_at_arm(setup, workspace)
        assert delivery.runtime_env == {}
        assert _subjects(workspace)[:2] == [
            "Name the minimum query length",
            "Add an in-flight limit setting",
        ]
