"""`sreforge scenarios list|validate|new`: the catalog, whether each folder is complete, and
a scaffold for a new one (docs/scenarios.md, "How to add a scenario")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sreforge_contracts import (
    ContractError,
    Scenario,
    default_use_cases,
    discover_scenarios,
    layout_problems,
    load_scenario,
)

from sreforge.qualify import qualification_of

__all__ = ["add_scenarios_commands", "catalog_rows", "list_scenarios", "validate_scenarios"]

_COLUMNS = ("id", "profile", "family", "difficulty", "delivery", "qualification", "title")


def add_scenarios_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `scenarios list|validate|new`."""
    from sreforge._scaffold import add_new_command

    scenarios = verbs.add_parser("scenarios", help="list, validate or scaffold scenario folders")
    scenario_verbs = scenarios.add_subparsers(title="scenario commands", metavar="VERB")
    listing = scenario_verbs.add_parser("list", help="the catalog under use-cases/")
    listing.add_argument("--json", action="store_true", help="one JSON object per scenario")
    listing.set_defaults(handler=lambda args: list_scenarios(as_json=args.json))
    validate = scenario_verbs.add_parser(
        "validate", help="check manifests and that each folder has every part a run needs"
    )
    validate.add_argument(
        "path", nargs="?", help="a scenario id or folder (default: every scenario)"
    )
    validate.set_defaults(handler=lambda args: validate_scenarios(args.path))
    add_new_command(scenario_verbs)


def _row(scenario: Scenario) -> dict[str, str]:
    manifest = scenario.manifest
    delivery = scenario.env.delivery_mode if scenario.env is not None else "-"
    return {
        "id": manifest.id, "profile": manifest.profile, "family": manifest.family,
        "difficulty": manifest.difficulty, "delivery": delivery,
        "qualification": qualification_of(scenario.verify_dir / "headroom.md"),
        "title": manifest.title,
    }  # fmt: skip


def catalog_rows(root: Path | None = None) -> list[dict[str, str]]:
    """One row per scenario folder under `root` (default: the checkout's `use-cases/`);
    an invalid folder's row has `qualification` INVALID and its error as the title."""
    rows = []
    for folder in discover_scenarios(root or default_use_cases()):
        try:
            rows.append(_row(load_scenario(folder)))
        except ContractError as error:
            blank = dict.fromkeys(_COLUMNS, "-")
            rows.append(
                blank | {"id": folder.name, "qualification": "INVALID", "title": str(error)}
            )
    return rows


def list_scenarios(*, as_json: bool = False) -> int:
    """Print the catalog: a table (id, profile, family, difficulty, delivery mode,
    qualification, title), or JSON lines."""
    rows = catalog_rows()
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return 0
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in _COLUMNS[:-1]}
    print("  ".join(c.upper().ljust(widths[c]) for c in _COLUMNS[:-1]) + "  TITLE")
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in _COLUMNS[:-1]) + "  " + row["title"])
    return 0


def validate_scenarios(path: str | None) -> int:
    """Validate one scenario (by id or folder, as `stack up`, `guard` and `qualify` take
    it), or all of them: the manifest and env parse, the folder has every part
    (`layout_problems`) and, for an incident, its stack's alert rules pass the rules lint
    with its paging alert among them (`stack_rule_problems`); exit 1 when any is not."""
    from sreforge_deployer import stack_rule_problems

    from sreforge._stack_cli import resolve_scenario

    try:
        folders = (
            [resolve_scenario(path)] if path else list(discover_scenarios(default_use_cases()))
        )
    except ValueError as error:
        print(f"scenarios validate: {error}", file=sys.stderr)
        return 1
    if not folders:
        print(f"no scenarios under {default_use_cases()}", file=sys.stderr)
        return 1
    failed = 0
    for folder in folders:
        try:
            scenario = load_scenario(folder)
            problems = layout_problems(scenario)
        except ContractError as error:
            problems = [str(error)]
        else:
            expected = scenario.manifest.expected
            if scenario.manifest.profile == "incident" and expected is not None:
                problems += stack_rule_problems(folder, expected.alert)
        if problems:
            failed += 1
            print(f"INVALID {folder}:")
            for problem in problems:
                print(f"  {problem}")
        else:
            print(f"ok      {folder}")
    return 1 if failed else 0
