"""Where an agent session runs (`place_session`) and the page it reads (`agent_page`)."""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import HarnessProfile, StackInfo
from sreforge_runner import RunnerSettings
from sreforge_runner._box import BoxSandbox
from sreforge_runner._placement import agent_page, place_session
from sreforge_runner._sandbox import HostSandbox

PUBLISHED = {"prometheus": "http://127.0.0.1:3100", "bookshelf-api": "http://127.0.0.1:31001"}
INSIDE = {"prometheus": "http://prometheus:9090", "bookshelf-api": "http://bookshelf-api:8080"}


def _stack(network: str | None) -> StackInfo:
    return StackInfo(
        stack="bookshelf-flask",
        run_dir="/tmp/stacks/run-1",
        agent_endpoints=PUBLISHED,
        operator_endpoints=PUBLISHED,
        agent_network=network,
        network_endpoints=INSIDE if network else {},
    )


def _profile(in_box: bool) -> HarnessProfile:
    return HarnessProfile(name="scripted", rein="scripted", in_box=in_box)


def test_a_boxable_agent_on_compose_goes_in_the_box_and_only_then(tmp_path: Path) -> None:
    """In the box: compose's agent network + `in_box` profile + the runner's setting on.
    Missing any of them: on the host, in the profile's sandbox, with the published URLs."""
    settings = RunnerSettings()
    where = (tmp_path / "ws", tmp_path / "agent", settings)
    boxed = place_session(_profile(True), _stack("sreforge-run-x_agent"), *where)
    assert isinstance(boxed, BoxSandbox)
    assert (boxed.network, boxed.endpoints, boxed.kind) == (
        "sreforge-run-x_agent",
        INSIDE,
        "in-box",
    )
    off = RunnerSettings(in_box=False)
    for profile, stack, given in (
        (_profile(False), _stack("sreforge-run-x_agent"), settings),  # a host-only CLI
        (_profile(True), _stack(None), settings),  # the local topology
        (_profile(True), _stack("sreforge-run-x_agent"), off),  # the runner says host-side
    ):
        placed = place_session(profile, stack, tmp_path / "ws", tmp_path / "agent", given)
        assert isinstance(placed, HostSandbox)
        assert placed.endpoints == tuple(PUBLISHED.values())


def test_the_boxed_agents_page_names_the_in_network_endpoints(tmp_path: Path) -> None:
    """Each published URL becomes its in-network one, paths kept, a port that merely
    starts with another's untouched; a host-side agent's page is left as it is."""
    page = (
        "| prometheus | http://127.0.0.1:3100 |\n| bookshelf-api | http://127.0.0.1:31001 |\n"
        "Try http://127.0.0.1:3100/api/v1/alerts first."
    )
    stack = _stack("sreforge-run-x_agent")
    settings = RunnerSettings()
    boxed = place_session(_profile(True), stack, tmp_path / "ws", tmp_path / "agent", settings)
    shown = agent_page(page, stack, boxed)
    assert "127.0.0.1" not in shown
    assert "| bookshelf-api | http://bookshelf-api:8080 |" in shown
    assert "http://prometheus:9090/api/v1/alerts" in shown
    host = place_session(_profile(False), stack, tmp_path / "ws", tmp_path / "agent", settings)
    assert agent_page(page, stack, host) == page
