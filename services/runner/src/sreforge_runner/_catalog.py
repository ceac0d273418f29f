"""The profile catalog: `agents/<name>.toml`, one `HarnessProfile` per file.

A file's `name` must be its stem. `scripted:<script>` resolves to the `scripted`
profile. Errors name the file and the field at fault.
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


def load_catalog(directory: Path) -> dict[str, HarnessProfile]:
    """Every profile in `directory`, by name."""
    if not directory.is_dir():
        raise ProfileError(f"agent catalog {directory}: no such folder")
    return {path.stem: load_profile(path) for path in sorted(directory.glob("*.toml"))}


def find_profile(directory: Path, agent: str) -> HarnessProfile:
    """The profile an agent ref selects, read from `directory`."""
    name = catalog_name(agent)
    path = directory / f"{name}.toml"
    if not name or "/" in name or name.startswith(".") or not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.toml"))) or "none"
        raise ProfileError(f"agent {agent!r}: unknown profile (catalog {directory}: {known})")
    return load_profile(path)


def _fields(error: ValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "profile"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)
