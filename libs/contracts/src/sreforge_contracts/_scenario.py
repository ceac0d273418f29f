"""A scenario folder on disk: its manifest, its scenario.env and where its parts are."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from sreforge_contracts._errors import ContractError, ScenarioNotFound
from sreforge_contracts._manifest import ScenarioManifest
from sreforge_contracts._scenario_env import ScenarioEnv, load_scenario_env

__all__ = [
    "Scenario",
    "default_use_cases",
    "discover_scenarios",
    "find_scenario",
    "load_manifest",
    "load_scenario",
]

MANIFEST = "scenario.toml"
USE_CASES_ENV = "SREFORGE_USE_CASES"


def default_use_cases() -> Path:
    """The `use-cases/` root every service and the CLI read: `SREFORGE_USE_CASES` if set,
    else the one of this checkout (found from this file, so any working directory works)."""
    configured = os.environ.get(USE_CASES_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[4] / "use-cases"


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario: its manifest, its stack-side env (if any) and its folder."""

    manifest: ScenarioManifest
    path: Path
    env: ScenarioEnv | None

    @property
    def id(self) -> str:
        """The scenario id (equal to the folder name)."""
        return self.manifest.id

    @property
    def manifest_path(self) -> Path:
        """`scenario.toml`."""
        return self.path / MANIFEST

    @property
    def trigger_page(self) -> Path:
        """`trigger.md`: the neutral page the agent receives."""
        return self.path / "trigger.md"

    @property
    def environment_dir(self) -> Path:
        """`environment/`: stack overlay and `scenario.env`."""
        return self.path / "environment"

    @property
    def env_path(self) -> Path:
        """`environment/scenario.env`."""
        return self.environment_dir / "scenario.env"

    @property
    def inject_dir(self) -> Path:
        """`inject/`: the organic-regression injector."""
        return self.path / "inject"

    @property
    def verify_dir(self) -> Path:
        """`verify/`: oracle notes (`oracle.md`), `negative/` fixes, `headroom.md`."""
        return self.path / "verify"

    @property
    def ci_tests_dir(self) -> Path:
        """`verify/ci/`: hidden tests CI runs against the submission (never agent-visible)."""
        return self.verify_dir / "ci"

    @property
    def fail_to_pass_dir(self) -> Path:
        """`verify/fail_to_pass/`: a patch scenario's hidden tests that fail on its base
        commit and must pass once fixed (never agent-visible)."""
        return self.verify_dir / "fail_to_pass"

    @property
    def pass_to_pass_dir(self) -> Path:
        """`verify/pass_to_pass/`: a patch scenario's hidden tests that pass on its base
        commit and must keep passing (never agent-visible)."""
        return self.verify_dir / "pass_to_pass"

    @property
    def negative_dir(self) -> Path:
        """`verify/negative/`: known-bad fixes that must fail."""
        return self.verify_dir / "negative"

    @property
    def solution_dir(self) -> Path:
        """`solution/`: the held-out reference fix."""
        return self.path / "solution"

    @property
    def records_dir(self) -> Path:
        """`records/`: pruned run records committed for this scenario."""
        return self.path / "records"


def load_manifest(path: str | Path) -> ScenarioManifest:
    """Parse one `scenario.toml`; errors read `<file>: <field>: <problem>`."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise ContractError(f"{file}: cannot read: {error.strerror}", source=str(file)) from None
    except tomllib.TOMLDecodeError as error:
        raise ContractError(f"{file}: malformed TOML: {error}", source=str(file)) from None
    try:
        return ScenarioManifest.model_validate(data)
    except ValidationError as error:
        raise ContractError.from_validation(error, str(file)) from None


def load_scenario(path: str | Path) -> Scenario:
    """Load a scenario folder: its manifest (id must equal the folder name) and env."""
    folder = Path(path)
    manifest_file = folder / MANIFEST
    manifest = load_manifest(manifest_file)
    if manifest.id != folder.name:
        raise ContractError(
            f"{manifest_file}: id: {manifest.id!r} does not match the folder name {folder.name!r}",
            field="id",
            source=str(manifest_file),
        )
    env_file = folder / "environment" / "scenario.env"
    env = load_scenario_env(env_file) if env_file.is_file() else None
    return Scenario(manifest=manifest, path=folder, env=env)


def discover_scenarios(root: str | Path) -> list[Path]:
    """Scenario folders under a `use-cases/` root (`*/scenarios/*`), sorted.

    Every folder is listed, with or without a manifest, so validation reports
    a folder that lacks one instead of skipping it.
    """
    return sorted(p for p in Path(root).glob("*/scenarios/*") if p.is_dir())


def find_scenario(root: str | Path, scenario_id: str) -> Scenario:
    """Load the scenario whose folder is `<root>/<use-case>/scenarios/<scenario_id>/`.

    `ScenarioNotFound` when no folder (or more than one) has that id; `ContractError`
    naming the file and field when the folder's manifest or env file is invalid.
    """
    folders = [folder for folder in discover_scenarios(root) if folder.name == scenario_id]
    if len(folders) != 1:
        found = ", ".join(map(str, folders)) if folders else "none"
        raise ScenarioNotFound(
            f"scenario {scenario_id!r}: expected one folder under {root}/*/scenarios/, "
            f"found {found}",
            field="scenario",
        )
    return load_scenario(folders[0])
