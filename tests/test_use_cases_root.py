"""One `use-cases/` root for every service and the CLI, whatever the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from sreforge_context._settings import ContextSettings
from sreforge_contracts import default_use_cases, find_scenario
from sreforge_correlator._settings import CorrelatorSettings
from sreforge_deployer._settings import DeployerSettings
from sreforge_oracle._settings import OracleSettings
from sreforge_runner._settings import RunnerSettings


def test_every_service_finds_the_checkouts_scenarios_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started outside the checkout, the services' and CLI's default `use-cases/` root is
    still the checkout's (the oracle once read `./use-cases` and graded nothing elsewhere)."""
    monkeypatch.delenv("SREFORGE_USE_CASES", raising=False)
    monkeypatch.chdir(tmp_path)
    root = default_use_cases()
    assert root.is_absolute()
    assert find_scenario(root, "latency-cache-stampede").path.is_dir()
    assert OracleSettings().use_cases_dir == root
    assert ContextSettings().use_cases_root == root
    assert RunnerSettings().use_cases_root == root
    assert CorrelatorSettings().use_cases == root
    assert DeployerSettings().use_cases == root
    monkeypatch.setenv("SREFORGE_USE_CASES", str(tmp_path))
    assert default_use_cases() == tmp_path
    assert OracleSettings().use_cases_dir == tmp_path
