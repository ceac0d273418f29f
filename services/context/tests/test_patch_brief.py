"""A patch run's brief: a task page with no services, no eval_only, the same guard."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sreforge_context import ContextSettings, brief_for
from sreforge_contracts import BriefReady, RunState, StackInfo, default_use_cases, find_scenario

from .conftest import GitRepo


def test_a_patch_run_gets_a_task_page_and_no_eval_only(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: Callable[..., RunState]
) -> None:
    """No stack: the page lists no services, says nothing of a redeploy, and the contract
    carries no alert to clear; the workspace is still leak-checked."""
    workspace: Path = git_repo(clean_files)
    base = make_state(workspace)
    assert base.stack is not None
    stack = StackInfo(
        stack="bookshelf-flask",
        run_dir=base.stack.run_dir,
        agent_endpoints={},
        operator_endpoints={},
        run_workspace=base.stack.run_workspace,
    )
    state = base.model_copy(
        update={"scenario_id": "patch-stale-sort-keys", "expected_alert": None, "stack": stack}
    )
    use_cases = default_use_cases()
    scenario = find_scenario(use_cases, "patch-stale-sort-keys")
    assert state.alert_fired_at is not None
    brief = brief_for(
        state, scenario, state.alert_fired_at, ContextSettings(use_cases_root=use_cases)
    )
    assert isinstance(brief, BriefReady), brief
    assert brief.contract.eval_only is None
    assert brief.contract.scenario.profile == "patch"
    assert brief.page.startswith("# Task")
    assert "## Services" not in brief.page
    assert "redeploy" not in brief.page
