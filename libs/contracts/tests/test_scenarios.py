"""Scenario folders: scenario.toml, scenario.env, discovery, and field-named errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sreforge_contracts import (
    ContractError,
    ScenarioNotFound,
    discover_scenarios,
    find_scenario,
    load_scenario,
    load_scenario_env,
    parse_scenario_env,
)


def _rewrite(folder: Path, old: str, new: str) -> None:
    manifest = folder / "scenario.toml"
    text = manifest.read_text(encoding="utf-8")
    assert old in text, f"sample manifest lacks {old!r}"
    manifest.write_text(text.replace(old, new), encoding="utf-8")


def test_seed_manifest_loads_with_every_section(scenario_dir: Path) -> None:
    """Every section of seed 001 is read, plus scope and the max_clear default."""
    scenario = load_scenario(scenario_dir)
    manifest = scenario.manifest
    assert manifest.id == "latency-cache-stampede"
    assert manifest.profile == "incident"
    assert manifest.expected is not None
    assert manifest.expected.alert == "BookshelfApiLatencyP99High"
    assert manifest.expected.p99_promql.startswith("histogram_quantile(0.99")
    assert manifest.determinism.confirm_fire_timeout_seconds == 240
    assert manifest.determinism.sustained_clear_seconds == 360
    assert manifest.determinism.max_clear_time_seconds == 600
    assert manifest.inject is not None
    assert manifest.inject.command is None
    assert manifest.verify.pass_threshold == 0.85
    assert manifest.verify.weights["alert_cleared"] == 0.35
    assert manifest.verify.scope == ["api"]
    assert manifest.endpoints == {"prometheus": "http://127.0.0.1:9090"}
    assert scenario.env is None
    assert scenario.verify_dir == scenario_dir / "verify"
    assert scenario.env_path == scenario_dir / "environment" / "scenario.env"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "time_to_clear   = 0.10",
            "time_to_clear   = 0.00",
            "verify.weights: sum to 0.9, expected 1.0",
        ),
        (
            "no_new_alerts   = 0.10",
            "no_new_alerts   = 0.10\nextra_signal = 0.0",
            "verify: weights: extra_signal not listed in signals",
        ),
        (
            '"no_new_alerts"]',
            '"no_new_alerts", "load_held"]',
            "verify: weights: no weight for signal(s) load_held",
        ),
        ('id         = "latency-cache-stampede"', 'id = "../x"', "id: String should match"),
        ('id         = "latency-cache-stampede"', 'id = "A B"', "id: String should match"),
        ('id         = "latency-cache-stampede"', 'id = ""', "id: String should match"),
        ('difficulty = "easy"', 'difficulty = "trivial"', "difficulty: Input should be"),
        ("pass_threshold   = 0.85", "pass_threshold   = 1.5", "verify.pass_threshold:"),
        ("pass_threshold   = 0.85", 'pass_threshold   = "high"', "verify.pass_threshold:"),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\nservice_min_ok_ratio = 0",
            "verify.service_min_ok_ratio:",
        ),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\nservice_min_ok_ratio = 1.5",
            "verify.service_min_ok_ratio:",
        ),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\nservice_ok_ratio = 0.9",
            "verify.service_ok_ratio: unknown field",
        ),
        (
            "load_active_during_scoring = true",
            'load_active_during_scoring = true\nci_changed_tests = ["../tests/test_x.py"]',
            "verify.ci_changed_tests: '../tests/test_x.py' is not a test path",
        ),
        (
            "load_active_during_scoring = true",
            'load_active_during_scoring = true\nci_changed_tests = ["tests/notes.txt::t"]',
            "verify.ci_changed_tests: 'tests/notes.txt::t' does not name a .py",
        ),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\nclient_latency_objective_seconds = 0.3",
            "verify: client_latency_objective_ratio: the client latency objective needs both",
        ),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\nclient_latency_objective_seconds = 0\n"
            "client_latency_objective_ratio = 0.99",
            "verify.client_latency_objective_seconds:",
        ),
        (
            "load_active_during_scoring = true",
            "load_active_during_scoring = true\ntelemetry = { app_requests_promql = 'x' }",
            "verify.telemetry.load_requests_promql: required field missing",
        ),
        ("continuous = true", "continuous = true\nsurprise = 1", "inject.surprise: unknown field"),
        ('profile    = "incident"', 'profile    = "drill"', "profile: Input should be"),
        ("[expected]", "[expectations]", "expectations: unknown field"),
        (
            "sustained_clear_seconds      = 360",
            "sustained_clear_seconds = -1",
            "determinism.sustained_clear_seconds:",
        ),
        ('alert_fired_at               = ""', "alert_fired_at = ", "malformed TOML"),
    ],
)
def test_bad_manifests_name_file_and_field(
    scenario_dir: Path, old: str, new: str, message: str
) -> None:
    """Each bad manifest fails with `<path>/scenario.toml: <field>: <problem>`."""
    _rewrite(scenario_dir, old, new)
    with pytest.raises(ContractError) as caught:
        load_scenario(scenario_dir)
    text = str(caught.value)
    assert text.startswith(f"{scenario_dir / 'scenario.toml'}: ")
    assert message in text


def test_service_gate_is_optional_and_read_when_declared(scenario_dir: Path) -> None:
    """Without `service_min_ok_ratio` no service gate is declared; with it, the share is read."""
    assert load_scenario(scenario_dir).manifest.verify.service_min_ok_ratio is None
    _rewrite(
        scenario_dir,
        "load_active_during_scoring = true",
        "load_active_during_scoring = true\nservice_min_ok_ratio = 0.95",
    )
    assert load_scenario(scenario_dir).manifest.verify.service_min_ok_ratio == 0.95


def test_manifest_id_must_equal_the_folder_name(scenario_dir: Path) -> None:
    """A copied folder that kept its old id is caught before anything runs."""
    moved = scenario_dir.rename(scenario_dir.with_name("copy-of-stampede"))
    with pytest.raises(ContractError, match="id: 'latency-cache-stampede' does not match"):
        load_scenario(moved)


def test_missing_manifest_names_the_file(tmp_path: Path) -> None:
    """A scenario folder without scenario.toml is reported, not skipped."""
    with pytest.raises(ContractError, match=r"scenario\.toml: cannot read"):
        load_scenario(tmp_path)


def test_patch_profile_needs_base_commit_not_expected(scenario_dir: Path) -> None:
    """Patch scenarios have no alert; they pin the commit their hidden tests run on."""
    _rewrite(scenario_dir, 'profile    = "incident"', 'profile    = "patch"')
    with pytest.raises(ContractError, match="base_commit"):
        load_scenario(scenario_dir)
    _rewrite(scenario_dir, 'profile    = "patch"', 'profile = "patch"\nbase_commit = "abc123"')
    assert load_scenario(scenario_dir).manifest.base_commit == "abc123"


def test_scenario_env_is_loaded_beside_the_manifest(scenario_dir: Path) -> None:
    """`environment/scenario.env` binds the scenario to its delivery mode and load."""
    (scenario_dir / "environment" / "scenario.env").write_text(
        "# delivery\nDELIVERY_MODE=arm-runtime-notrace\nRUNTIME_ENV_VAR=CACHE_BACKEND\n"
        "RUNTIME_ENV_VALUE='null'\n\nREADINESS_GATE=on\nLOAD_PROFILE=storm\nLOAD_RATE=20\n"
        "FAULT_PATCH=inject/fault.patch\n",
        encoding="utf-8",
    )
    env = load_scenario(scenario_dir).env
    assert env is not None
    assert env.delivery_mode == "arm-runtime-notrace"
    assert (env.runtime_env_var, env.runtime_env_value) == ("CACHE_BACKEND", "null")
    assert env.runtime_override == "CACHE_BACKEND=null"
    assert env.readiness_gate_on
    assert env.load_rate == 20.0
    assert env.extra == {"FAULT_PATCH": "inject/fault.patch"}
    assert env.upstream_profile == "steady", "the upstream answers every lookup by default"


def test_upstream_profile_is_read_from_scenario_env() -> None:
    """`UPSTREAM_PROFILE` names the upstream's behaviour for the run."""
    env = parse_scenario_env("DELIVERY_MODE=arm-deploy-recent\nUPSTREAM_PROFILE=flaky-lookups\n")
    assert env.upstream_profile == "flaky-lookups"
    assert env.extra == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "DELIVERY_MODE: required field missing"),
        ("DELIVERY_MODE=yolo", "DELIVERY_MODE: Input should be"),
        ("DELIVERY_MODE=setup-baked\nREADINESS_GATE=yes", "READINESS_GATE: Input should be"),
        ("DELIVERY_MODE=setup-baked\nLOAD_RATE=-3", "LOAD_RATE: Input should be greater"),
        ("DELIVERY_MODE=setup-baked\nLOAD_RATE=fast", "LOAD_RATE: Input should be a valid"),
        ("DELIVERY_MODE=setup-baked\nUPSTREAM_PROFILE=flaky", "UPSTREAM_PROFILE: Input should be"),
        ("DELIVERY_MODE=arm-runtime-notrace", "arm-runtime-notrace needs RUNTIME_ENV_VAR"),
        ("DELIVERY_MODE=setup-baked\nRUNTIME_ENV_VAR=X", "must be set together"),
        ("DELIVERY_MODE=setup-baked\njust words", "scenario.env:2: expected KEY=VALUE"),
    ],
)
def test_bad_scenario_env_names_the_key(text: str, message: str) -> None:
    """Each bad scenario.env names the key (or line) at fault."""
    with pytest.raises(ContractError, match=r"^scenario\.env") as caught:
        parse_scenario_env(text)
    assert message in str(caught.value)


def test_scenario_env_file_errors_name_the_file(tmp_path: Path) -> None:
    """Errors from a file carry its path."""
    env_file = tmp_path / "scenario.env"
    env_file.write_text("DELIVERY_MODE=multi-commit\nLOAD_RATE=0\n", encoding="utf-8")
    with pytest.raises(ContractError, match=f"^{env_file}: LOAD_RATE"):
        load_scenario_env(env_file)
    with pytest.raises(ContractError, match="cannot read"):
        load_scenario_env(tmp_path / "absent.env")
    env_file.write_text("DELIVERY_MODE=multi-commit\nUPSTREAM_PROFILE=0.08\n", encoding="utf-8")
    with pytest.raises(ContractError, match=f"^{env_file}: UPSTREAM_PROFILE"):
        load_scenario_env(env_file)


def test_discover_lists_every_scenario_folder_sorted(scenario_dir: Path) -> None:
    """`use-cases/*/scenarios/*` folders are listed, a manifest-less one too."""
    root = scenario_dir.parents[2]
    (root / "bookshelf" / "scenarios" / "aaa-draft").mkdir()
    (root / "other" / "scenarios" / "zzz").mkdir(parents=True)
    (root / "bookshelf" / "scenarios" / "README.md").write_text("x", encoding="utf-8")
    found = [p.relative_to(root).as_posix() for p in discover_scenarios(root)]
    assert found == [
        "bookshelf/scenarios/aaa-draft",
        "bookshelf/scenarios/latency-cache-stampede",
        "other/scenarios/zzz",
    ]


def test_find_scenario_loads_the_one_folder_with_that_id(scenario_dir: Path) -> None:
    """Every service finds a run's scenario the same way: by folder name under the root."""
    root = scenario_dir.parents[2]
    assert find_scenario(root, "latency-cache-stampede").path == scenario_dir


def test_find_scenario_refuses_a_missing_or_ambiguous_id(scenario_dir: Path) -> None:
    """A missing id and an id under two use-cases are both errors naming the root."""
    root = scenario_dir.parents[2]
    with pytest.raises(ScenarioNotFound, match="found none"):
        find_scenario(root, "no-such-scenario")
    (root / "other" / "scenarios" / "latency-cache-stampede").mkdir(parents=True)
    with pytest.raises(ScenarioNotFound, match="expected one folder"):
        find_scenario(root, "latency-cache-stampede")


def test_find_scenario_reports_an_invalid_manifest_by_file_and_field(scenario_dir: Path) -> None:
    """A folder that exists but does not validate is a ContractError, not 'not found'."""
    _rewrite(scenario_dir, "pass_threshold   = 0.85", "pass_threshold   = 2")
    with pytest.raises(ContractError, match="pass_threshold") as caught:
        find_scenario(scenario_dir.parents[2], "latency-cache-stampede")
    assert not isinstance(caught.value, ScenarioNotFound)


def test_eval_only_comes_from_the_manifest_scaled(scenario_dir: Path) -> None:
    """The manifest is the single source of the oracle's windows; time_scale shrinks them."""
    manifest = load_scenario(scenario_dir).manifest
    full = manifest.eval_only()
    assert (full.max_clear_time_seconds, full.sustained_clear_seconds) == (600, 360)
    quick = manifest.eval_only(0.1)
    assert quick.alert_to_clear == "BookshelfApiLatencyP99High"
    assert quick.max_clear_time_seconds == pytest.approx(60)
    assert quick.sustained_clear_seconds == pytest.approx(36)
    assert manifest.determinism.scaled(0.1).confirm_fire_timeout_seconds == pytest.approx(24)
    with pytest.raises(ValueError, match="time_scale"):
        manifest.eval_only(0)
