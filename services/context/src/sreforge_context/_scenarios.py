"""Finding a run's scenario folder by its id under the use-cases root."""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import ContractError, Scenario, discover_scenarios, load_scenario

from sreforge_context._errors import ScenarioNotFound

__all__ = ["find_scenario"]


def find_scenario(root: Path, scenario_id: str) -> Scenario:
    """Load the scenario whose folder is named `scenario_id` under `root/*/scenarios/`."""
    for folder in discover_scenarios(root):
        if folder.name == scenario_id:
            try:
                return load_scenario(folder)
            except ContractError as error:
                raise ScenarioNotFound(f"scenario {scenario_id}: {error}") from error
    raise ScenarioNotFound(f"scenario {scenario_id!r} has no folder under {root}/*/scenarios/")
