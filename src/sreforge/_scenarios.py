"""`sreforge scenarios list|validate`: what scenarios exist and whether their files are sound."""

from __future__ import annotations

import sys
from pathlib import Path

from sreforge_contracts import ContractError, default_use_cases, discover_scenarios, load_scenario

__all__ = ["list_scenarios", "validate_scenarios"]


def list_scenarios() -> int:
    """Print one line per scenario folder: id, profile, difficulty, title."""
    for folder in discover_scenarios(default_use_cases()):
        try:
            manifest = load_scenario(folder).manifest
        except ContractError as error:
            print(f"{folder.name:<32} INVALID  {error}")
            continue
        print(f"{manifest.id:<32} {manifest.profile:<9} {manifest.difficulty:<7} {manifest.title}")
    return 0


def validate_scenarios(path: str | None) -> int:
    """Validate one scenario folder, or all of them; exit 1 when any is invalid."""
    folders = [Path(path)] if path else list(discover_scenarios(default_use_cases()))
    if not folders:
        print(f"no scenarios under {default_use_cases()}", file=sys.stderr)
        return 1
    failed = 0
    for folder in folders:
        try:
            load_scenario(folder)
        except ContractError as error:
            failed += 1
            print(f"INVALID {folder}: {error}")
        else:
            print(f"ok      {folder}")
    return 1 if failed else 0
