"""Where the correlator looks scenarios up: the use-cases root on disk."""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import ContractError, ScenarioManifest, ScenarioNotFound, find_scenario

from sreforge_correlator._errors import StartRejected

__all__ = ["ScenarioCatalog"]


class ScenarioCatalog:
    """Scenario manifests under a `use-cases/` root, read fresh on each lookup.

    Reading one `scenario.toml` costs well under a millisecond, and a fresh read
    means an edited scenario is picked up without restarting the engine.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def manifest(self, scenario_id: str) -> ScenarioManifest:
        """The manifest of `scenario_id`; `StartRejected` when it is absent or invalid."""
        try:
            return find_scenario(self.root, scenario_id).manifest
        except ScenarioNotFound:
            raise StartRejected(
                f"scenario: no scenario {scenario_id!r} under {self.root}"
            ) from None
        except ContractError as error:
            raise StartRejected(f"scenario: {scenario_id!r} is not runnable: {error}") from None
