"""The profile catalog: `agents/<name>.toml`, one `HarnessProfile` per file.

A file's `name` must be its stem. `scripted:<script>` resolves to the `scripted`
profile. An `installed` folder (the engine home's `agents/`, where `sreforge agents
install` writes ready profiles) overlays the catalog: its `<name>.toml` wins over the
catalog's. Errors name the file and the field at fault.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError
from sreforge_contracts import HarnessProfile

from sreforge_runner._errors import ProfileError

__all__ = ["catalog_name", "find_profile", "load_catalog", "load_profile"]


def catalog_name(agent: str) -> str:
    """The catalog entry an agent ref selects (`scripted:<script>` → `scripted`)."""
    return agent.split(":", 1)[0]


def load_profile(path: Path) -> HarnessProfile:
    """Read and validate one profile file; `ProfileError` names the file and field."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise ProfileError(f"{path}: cannot read: {error.strerror or error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ProfileError(f"{path}: not valid TOML: {error}") from error
    try:
        profile = HarnessProfile.model_validate(data)
    except ValidationError as error:
        raise ProfileError(f"{path}: {_fields(error)}") from error
    if profile.name != path.stem:
        raise ProfileError(f"{path}: name: {profile.name!r} must match the file name")
    return profile


def load_catalog(directory: Path, installed: Path | None = None) -> dict[str, HarnessProfile]:
    """Every profile in `directory`, by name, overlaid by those in `installed`."""
    if not directory.is_dir():
        raise ProfileError(f"agent catalog {directory}: no such folder")
    paths = {path.stem: path for path in directory.glob("*.toml")}
    paths.update(_installed(installed))
    return {name: load_profile(paths[name]) for name in sorted(paths)}


def find_profile(directory: Path, agent: str, installed: Path | None = None) -> HarnessProfile:
    """The profile an agent ref selects: from `installed` when it has one, else from
    `directory`."""
    name = catalog_name(agent)
    paths = [folder / f"{name}.toml" for folder in (installed, directory) if folder is not None]
    found = [path for path in paths if path.is_file()]
    if not name or "/" in name or name.startswith(".") or not found:
        known = sorted({p.stem for p in directory.glob("*.toml")} | set(_installed(installed)))
        raise ProfileError(
            f"agent {agent!r}: unknown profile (catalog {directory}: {', '.join(known) or 'none'})"
        )
    return load_profile(found[0])


def _installed(folder: Path | None) -> dict[str, Path]:
    if folder is None or not folder.is_dir():
        return {}
    return {path.stem: path for path in folder.glob("*.toml")}


def _fields(error: ValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "profile"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)
