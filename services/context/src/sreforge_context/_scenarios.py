"""Finding a run's scenario folder by its id under the use-cases root."""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import ContractError, Scenario
from sreforge_contracts import find_scenario as _find

from sreforge_context._errors import ScenarioNotFound

__all__ = ["find_scenario"]


def find_scenario(root: Path, scenario_id: str) -> Scenario:
    """The run's scenario; `ScenarioNotFound` (this service's error) when absent or invalid."""
    try:
        return _find(root, scenario_id)
    except ContractError as error:
        raise ScenarioNotFound(str(error)) from error
