"""stack.toml and the scenario folder are complete and consistent with each other."""

from __future__ import annotations

import re
import tomllib

from sreforge_contracts import load_scenario

from .conftest import SCENARIO, STACK

# What both topologies fill (the wiring of `_wiring.py` and `_compose_file.py`).
PLACEHOLDERS = {
    "python",
    "host",
    "port",
    "db_path",
    "upstream_url",
    "app_url",
    "load_rate",
    "load_profile",
    "upstream_profile",
}


def _stack() -> dict[str, object]:
    return tomllib.loads((STACK / "stack.toml").read_text())


def test_stack_components_are_launchable_as_described() -> None:
    """Each component names a real cwd, a health path and only known argv placeholders."""
    stack = _stack()
    assert stack["service"] == "bookshelf-api"
    assert (STACK / str(stack["workspace_source"]) / "gunicorn.conf.py").is_file()
    components = stack["components"]
    assert isinstance(components, list)
    assert [c["name"] for c in components] == ["bookmeta", "bookshelf-api", "loadgen"]
    for component in components:
        cwd = component["cwd"]
        assert cwd == "workspace" or (STACK / cwd).is_dir(), component["name"]
        assert component["health"] == "/healthz"
        values = [*component["argv"], *component.get("env", {}).values()]
        used = {name for value in values for name in re.findall(r"\{(\w+)\}", value)}
        assert used <= PLACEHOLDERS, f"{component['name']}: {used - PLACEHOLDERS}"


def test_scenario_folder_is_complete_and_valid() -> None:
    """The manifest and scenario.env parse with the harness contracts; every part exists."""
    scenario = load_scenario(SCENARIO)
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-deploy-recent"
    assert scenario.env.load_profile == "search-storm"
    assert scenario.manifest.verify.scope == ["bookshelf-api"]
    assert "## Root cause (harness-internal)" in (SCENARIO / "verify" / "oracle.md").read_text()
    assert list((SCENARIO / "verify" / "negative").glob("*.patch"))
    assert (SCENARIO / "solution" / "fix.patch").is_file()


def test_trigger_page_does_not_name_the_alert() -> None:
    """The agent finds the firing alert in Alertmanager; the page stays neutral."""
    page = (SCENARIO / "trigger.md").read_text()
    manifest = load_scenario(SCENARIO).manifest
    assert manifest.expected is not None
    assert manifest.expected.alert not in page
    assert "p99" not in page.lower()
