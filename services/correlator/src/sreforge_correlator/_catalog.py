"""Where the correlator looks scenarios (and `scripted:<name>` fixtures) up, on disk."""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import ContractError, ScenarioManifest, ScenarioNotFound, find_scenario

from sreforge_correlator._errors import StartRejected

__all__ = ["SCRIPT_SUFFIXES", "ScenarioCatalog"]

SCRIPT_SUFFIXES = ("", ".patch", ".sh")
"""What `scripted:<name>` may name, as the runner resolves it (`<name>`, `.patch`, `.sh`)."""


class ScenarioCatalog:
    """Scenario manifests under a `use-cases/` root, read fresh on each lookup.

    Reading one `scenario.toml` costs well under a millisecond, and a fresh read
    means an edited scenario is picked up without restarting the engine.
    """

    def __init__(self, root: Path, scripts_dir: Path | None = None) -> None:
        self.root = root
        self.scripts_dir = scripts_dir

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

    def check_script(self, scenario_id: str, name: str) -> None:
        """`StartRejected` unless `scripted:<name>` finds `<name>[.patch|.sh]` where the
        runner looks: the scenario's `verify/negative/`, then the scripts dir."""
        try:
            folders = [find_scenario(self.root, scenario_id).negative_dir]
        except ContractError:
            folders = []  # the scenario lookup names that problem itself
        folders += [self.scripts_dir] if self.scripts_dir else []
        for folder in folders:
            if any((folder / f"{name}{suffix}").is_file() for suffix in SCRIPT_SUFFIXES):
                return
        searched = ", ".join(str(folder) for folder in folders) or "no folders"
        raise StartRejected(f"agent: scripted:{name}: no {name}[.patch|.sh] in {searched}")
