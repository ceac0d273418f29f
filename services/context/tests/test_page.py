"""The run contract and the on-call page, built purely from the run state and scenario."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sreforge_context import (
    ContextSettings,
    ScenarioInvalid,
    Surface,
    Tells,
    agent_services,
    brief_for,
    find_leaks,
    find_scenario,
    render_page,
)
from sreforge_contracts import (
    AgentContext,
    BriefReady,
    RunFailed,
    RunState,
    RunWorkspace,
    load_scenario,
)

GitRepo = Callable[..., Path]
MakeState = Callable[..., RunState]
BOOKSHELF_SCENARIO = (
    Path(__file__).resolve().parents[3] / "use-cases/bookshelf/scenarios/latency-cache-stampede"
)


@pytest.fixture
def settings(use_cases: Path) -> ContextSettings:
    """Context settings over the test use-cases root."""
    return ContextSettings(use_cases_root=use_cases)


def test_services_use_manifest_names_and_only_what_the_stack_has() -> None:
    """`api` names the service; grafana is left out because this stack has none."""
    endpoints = {"prometheus": "http://p", "shop-api": "http://a", "extra": "http://x"}
    names = {"prometheus": "prometheus", "grafana": "grafana", "api": "shop-api"}
    assert agent_services(endpoints, names) == {
        "prometheus": "http://p",
        "api": "http://a",
        "extra": "http://x",
    }
    assert agent_services(endpoints, None) == endpoints


def test_contract_carries_agent_view_workspace_and_scaled_eval_only(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, settings: ContextSettings
) -> None:
    """The contract has the agent's endpoints, the workspace, `submit`, and eval_only at scale."""
    workspace = git_repo(clean_files)
    state = make_state(workspace)
    scenario = find_scenario(settings.use_cases_root, "checkout-slow")
    brief = brief_for(state, scenario, state.alert_fired_at, settings)
    assert isinstance(brief, BriefReady)
    contract = brief.contract
    assert contract.agent_context.services == {
        "prometheus": "http://127.0.0.1:20001",
        "alertmanager": "http://127.0.0.1:20002",
        "api": "http://127.0.0.1:20003",
    }
    assert contract.agent_context.workspace_path == str(workspace)
    assert contract.agent_context.run_workspace.service == "shop-api"
    assert contract.agent_context.submit_command == "submit"
    assert contract.scenario.id == "checkout-slow"
    assert contract.scenario.expected_alert == "ShopCheckoutLatencyHigh"
    assert contract.scenario.alert_fired_at == state.alert_fired_at
    assert contract.eval_only.alert_to_clear == "ShopCheckoutLatencyHigh"
    assert contract.eval_only.sustained_clear_seconds == pytest.approx(36)
    assert contract.eval_only.max_clear_time_seconds == pytest.approx(60)


def test_a_sandbox_workspace_path_is_configurable(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, use_cases: Path
) -> None:
    """A sandbox that mounts the workspace elsewhere tells the agent its own path."""
    state = make_state(git_repo(clean_files))
    settings = ContextSettings(use_cases_root=use_cases, agent_workspace_path="/workspace")
    brief = brief_for(
        state, find_scenario(use_cases, "checkout-slow"), state.alert_fired_at, settings
    )
    assert isinstance(brief, BriefReady)
    assert brief.contract.agent_context.workspace_path == "/workspace"
    assert "`/workspace`" in brief.page


def test_page_has_trigger_services_workspace_and_submit_but_no_alert(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, settings: ContextSettings
) -> None:
    """What an on-call engineer gets; not the alert name, not the scenario."""
    workspace = git_repo(clean_files)
    state = make_state(workspace)
    brief = brief_for(
        state,
        find_scenario(settings.use_cases_root, "checkout-slow"),
        state.alert_fired_at,
        settings,
    )
    assert isinstance(brief, BriefReady)
    page = brief.page
    assert "Customers say checking out takes many seconds." in page
    for url in brief.contract.agent_context.services.values():
        assert url in page
    assert str(workspace) in page
    assert "`submit`" in page
    assert "`submit --rca FILE`" in page
    assert "ShopCheckoutLatencyHigh" not in page
    assert "checkout-slow" not in page


def test_a_trigger_page_naming_the_alert_aborts_the_run(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, settings: ContextSettings
) -> None:
    """A page that names the alert would spoon-feed the diagnosis: RunFailed(aborted)."""
    scenario = find_scenario(settings.use_cases_root, "checkout-slow")
    scenario.trigger_page.write_text("ShopCheckoutLatencyHigh is firing.\n")
    state = make_state(git_repo(clean_files))
    outcome = brief_for(state, scenario, state.alert_fired_at, settings)
    assert isinstance(outcome, RunFailed)
    assert (outcome.stage, outcome.verdict) == ("context", "aborted")
    assert "eval-only alert_to_clear in page line" in outcome.reason


def test_a_workspace_leak_aborts_the_run_naming_the_file(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, settings: ContextSettings
) -> None:
    """A harness word planted in the workspace fails the run and says where."""
    workspace = git_repo({**clean_files, "shop/oracle_hook.py": "pass\n"})
    state = make_state(workspace)
    outcome = brief_for(
        state,
        find_scenario(settings.use_cases_root, "checkout-slow"),
        state.alert_fired_at,
        settings,
    )
    assert isinstance(outcome, RunFailed)
    assert "harness word 'oracle' in workspace file names" in outcome.reason


def test_the_real_bookshelf_page_is_clean() -> None:
    """The bookshelf scenario's trigger.md renders into a page with no tells."""
    if not (BOOKSHELF_SCENARIO / "trigger.md").is_file():
        pytest.skip("the bookshelf scenario is not present")
    scenario = load_scenario(BOOKSHELF_SCENARIO)
    assert scenario.manifest.expected is not None
    context = AgentContext(
        services={"prometheus": "http://127.0.0.1:1", "api": "http://127.0.0.1:2"},
        run_workspace=RunWorkspace(path="/tmp/ws", service="bookshelf-api"),
        workspace_path="/tmp/ws",
    )
    page = render_page(scenario.trigger_page.read_text(), context)
    tells = Tells.for_run(scenario.id, scenario.manifest.expected.alert)
    assert find_leaks([Surface("page", page)], tells) == []


def test_a_scenario_without_trigger_page_cannot_be_briefed(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, settings: ContextSettings
) -> None:
    """A missing trigger.md is named, not turned into an empty page."""
    scenario = find_scenario(settings.use_cases_root, "checkout-slow")
    scenario.trigger_page.unlink()
    state = make_state(git_repo(clean_files))
    with pytest.raises(ScenarioInvalid, match=r"cannot read trigger\.md"):
        brief_for(state, scenario, state.alert_fired_at, settings)
