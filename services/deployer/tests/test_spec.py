"""Reading stack and scenario descriptions: errors name the file and the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sreforge_contracts import RunRequested
from sreforge_deployer import DeployerSettings, StackSpecError
from sreforge_deployer._spec import ScenarioSetup, load_scenario_setup, load_stack_spec
from sreforge_deployer._topology import run_topology
from sreforge_deployer._wiring import Wiring
from sreforge_deployer.local import LocalStack

from .conftest import STAMPEDE, TINY_SCENARIOS


def _copy_tiny(tmp_path: Path) -> Path:
    root = tmp_path / "uc"
    shutil.copytree(TINY_SCENARIOS.parent, root)
    return root


def test_bookshelf_stack_and_scenario_are_read() -> None:
    """The real stack.toml and scenario folder give the topology what it needs."""
    setup = load_scenario_setup(STAMPEDE)
    spec = load_stack_spec(setup.stack_dir)
    assert setup.delivery_mode == "arm-deploy-recent"
    assert setup.expected_alert == "BookshelfApiLatencyP99High"
    assert setup.load_rate
    assert setup.load_profile
    assert spec.service == "bookshelf-api"
    assert spec.load is not None
    assert [c.name for c in spec.upstreams] == ["bookmeta"]


def _upstream_flags(setup: ScenarioSetup) -> list[str]:
    """bookmeta's argv as the local topology launches it for `setup`."""
    spec = load_stack_spec(setup.stack_dir)
    ports = {name: 20000 + n for n, name in enumerate(c.name for c in spec.components)}
    wiring = Wiring(spec, setup, DeployerSettings(), Path("/runs/r1"), ports, 0.1)
    return wiring.launch(spec.upstreams[0], {}).argv


def test_the_upstream_runs_the_profile_the_scenario_names() -> None:
    """`UPSTREAM_PROFILE` reaches bookmeta's `--profile`; without it the upstream is steady."""
    setup = load_scenario_setup(STAMPEDE)
    argv = _upstream_flags(setup)
    assert argv[argv.index("--profile") + 1] == "steady"
    flaky = _upstream_flags(setup.model_copy(update={"upstream_profile": "flaky-lookups"}))
    assert flaky[flaky.index("--profile") + 1] == "flaky-lookups"
    assert "--error-rate" not in flaky, "the profile, not a fixed rate, sets the upstream's errors"


def test_missing_scenario_env_names_the_file(tmp_path: Path) -> None:
    """Without environment/scenario.env the error says which file is missing."""
    root = _copy_tiny(tmp_path)
    (root / "scenarios" / "tiny-ok" / "environment" / "scenario.env").unlink()
    with pytest.raises(StackSpecError, match=r"environment/scenario\.env: .*missing"):
        load_scenario_setup(root / "scenarios" / "tiny-ok")


def test_malformed_stack_toml_names_file_and_field(tmp_path: Path) -> None:
    """A component without argv is refused naming stack.toml and the field."""
    root = _copy_tiny(tmp_path)
    path = root / "stacks" / "tiny" / "stack.toml"
    path.write_text(path.read_text().replace('service = "tiny-api"', 'service = "nope"'))
    with pytest.raises(StackSpecError, match=r"stack\.toml: .*service 'nope' is not one of"):
        load_stack_spec(root / "stacks" / "tiny")


def test_unknown_placeholder_names_the_component(tmp_path: Path) -> None:
    """An argv placeholder the topology does not fill fails before anything starts."""
    root = _copy_tiny(tmp_path)
    path = root / "stacks" / "tiny" / "stack.toml"
    path.write_text(path.read_text().replace('"--port", "{port}"]', '"--port", "{prot}"]', 1))
    stack = LocalStack(
        root / "scenarios" / "tiny-ok",
        time_scale=0.1,
        settings=DeployerSettings(runs_root=tmp_path / "runs"),
    )
    with pytest.raises(StackSpecError, match=r"'tiny-upstream': unknown placeholder 'prot'"):
        stack.up()
    assert not stack.run_dir.exists()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'reaches = ["tiny-upstream"]',
            'reaches = ["nope"]',
            r"stack\.toml: .*reaches 'nope', which is not another component",
        ),
        (
            'reaches = ["tiny-upstream"]',
            'reaches = ["tiny-upstream"]\negress = ["10.0.0.5:5432"]',
            r"stack\.toml: components\.1\.egress: .*'10\.0\.0\.5:5432'.*loopback",
        ),
        (
            'name = "tiny-load"',
            'name = "tiny-load"\nreaches = ["tiny-upstream"]',
            r"stack\.toml: .*'tiny-load': only the service \('tiny-api'\) is confined",
        ),
    ],
)
def test_dependencies_are_validated_naming_the_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    """`reaches` names other components, `egress` loopback HOST:PORTs, and only the
    (confined) service declares either: anything else is refused naming stack.toml."""
    root = _copy_tiny(tmp_path)
    path = root / "stacks" / "tiny" / "stack.toml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    with pytest.raises(StackSpecError, match=message):
        load_stack_spec(root / "stacks" / "tiny")


def test_the_bookshelf_service_declares_its_upstream_only() -> None:
    """The bookshelf service reaches bookmeta and nothing else; the rest declare nothing."""
    spec = load_stack_spec(load_scenario_setup(STAMPEDE).stack_dir)
    assert spec.component("bookshelf-api").reaches == ["bookmeta"]
    assert spec.component("bookshelf-api").egress == []
    assert all(not c.reaches and not c.egress for c in spec.components if c.name != spec.service)


def _requested(scenario: str, topology: str | None = None) -> RunRequested:
    return RunRequested.model_validate(
        {
            "run_id": "run-topology-1",
            "producer": "correlator",
            "scenario": scenario,
            "agent": "noop",
            "alert_route": "r1",
            "topology": topology,
        }
    )


def test_a_run_takes_the_requested_topology_else_the_stacks_else_local(tmp_path: Path) -> None:
    """Resolution order: `run.start`'s topology, then the stack's `topology`, then local;
    an unreadable scenario resolves to local (opening it then names the problem)."""
    root = _copy_tiny(tmp_path)
    settings = DeployerSettings(use_cases=root.parent, runs_root=tmp_path / "runs")
    assert run_topology(_requested("tiny-ok"), settings) == "local", "no declaration: local"
    assert run_topology(_requested("tiny-ok", "compose"), settings) == "compose"
    stack_toml = root / "stacks" / "tiny" / "stack.toml"
    stack_toml.write_text('topology = "compose"\n' + stack_toml.read_text())
    assert load_stack_spec(stack_toml.parent).topology == "compose"
    assert run_topology(_requested("tiny-ok"), settings) == "compose", "the stack's declaration"
    assert run_topology(_requested("tiny-ok", "local"), settings) == "local", "the request wins"
    assert run_topology(_requested("no-such-scenario"), settings) == "local"


def test_a_stack_declaring_an_unknown_topology_names_the_field(tmp_path: Path) -> None:
    """`topology = "k8s"` in stack.toml is refused, naming `topology`."""
    root = _copy_tiny(tmp_path)
    stack_toml = root / "stacks" / "tiny" / "stack.toml"
    stack_toml.write_text('topology = "k8s"\n' + stack_toml.read_text())
    with pytest.raises(StackSpecError, match="topology"):
        load_stack_spec(stack_toml.parent)


def test_the_bookshelf_stack_declares_no_topology() -> None:
    """The bookshelf stack keeps the default: its runs are local unless asked otherwise."""
    assert load_stack_spec(load_scenario_setup(STAMPEDE).stack_dir).topology is None
