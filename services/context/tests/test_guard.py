"""The guard as the brief runs it: every surface, one reason naming surface and tell."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sreforge_context import (
    GUARD_REASON_PREFIX,
    ContextSettings,
    EndpointReply,
    Tells,
    brief_for,
    find_scenario,
    guard_scan,
)
from sreforge_contracts import BriefReady, RunFailed, RunState

GitRepo = Callable[..., Path]
MakeState = Callable[..., RunState]


def banner(server: str) -> Callable[[str], EndpointReply]:
    """A `Fetch` where every endpoint answers 200 with a `Server:` header."""

    def fetch(url: str) -> EndpointReply:
        return EndpointReply(status=200, headers={"Server": server}, body="{}")

    return fetch


def _brief(state: RunState, use_cases: Path, server: str) -> BriefReady | RunFailed:
    settings = ContextSettings(use_cases_root=use_cases)
    scenario = find_scenario(use_cases, state.scenario_id)
    assert state.alert_fired_at is not None
    return brief_for(state, scenario, state.alert_fired_at, settings, banner(server))


def test_a_clean_run_is_briefed(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, use_cases: Path
) -> None:
    """Page, workspace and endpoints all clean: a BriefReady."""
    outcome = _brief(make_state(git_repo(clean_files)), use_cases, "gunicorn")
    assert isinstance(outcome, BriefReady)


def test_an_endpoint_banner_aborts_the_brief_naming_surface_and_tell(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, use_cases: Path
) -> None:
    """The reason starts with the guard's prefix and says which endpoint path told what."""
    outcome = _brief(make_state(git_repo(clean_files)), use_cases, "oracle-proxy/2")
    assert isinstance(outcome, RunFailed)
    assert outcome.verdict == "aborted"
    assert outcome.reason.startswith(GUARD_REASON_PREFIX)
    assert "harness word 'oracle' in endpoint prometheus /api/v1/targets line" in outcome.reason


def test_leak_check_off_skips_the_endpoints_too(
    git_repo: GitRepo, clean_files: dict[str, str], make_state: MakeState, use_cases: Path
) -> None:
    """`SREFORGE_CONTEXT_LEAK_CHECK=false` (a debugging switch) turns the whole guard off."""
    settings = ContextSettings(use_cases_root=use_cases, leak_check=False)
    state = make_state(git_repo(clean_files))
    scenario = find_scenario(use_cases, state.scenario_id)

    def never(url: str) -> EndpointReply:
        raise AssertionError(f"fetched {url} with the guard off")

    assert state.alert_fired_at is not None
    assert isinstance(brief_for(state, scenario, state.alert_fired_at, settings, never), BriefReady)


@pytest.mark.parametrize("kind", ["page", "workspace", "endpoints"])
def test_each_surface_kind_is_gathered_and_reported(
    kind: str, git_repo: GitRepo, clean_files: dict[str, str]
) -> None:
    """`guard_scan` reads every kind it is given and finds a tell planted in each one."""
    tells = Tells.for_run("checkout-slow", "ShopCheckoutLatencyHigh")
    files = {**clean_files, "notes.md": "fault\n"} if kind == "workspace" else clean_files
    scan = guard_scan(
        tells,
        page="fault\n" if kind == "page" else "all good\n",
        workspace=git_repo(files),
        endpoints={"shop-api": "http://s"},
        fetch=banner("fault-box" if kind == "endpoints" else "gunicorn"),
    )
    assert set(scan.surfaces) == {"page", "workspace", "endpoints"}
    assert scan.leaks
    kinds = {"page" if leak.where == "page" else leak.where.split(" ")[0] for leak in scan.leaks}
    assert (
        kinds
        == {"page": {"page"}, "workspace": {"workspace", "git"}, "endpoints": {"endpoint"}}[kind]
    )
