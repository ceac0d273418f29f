"""What a shipped scenario folder must hold beyond a valid manifest (SPEC §4, seed `001_*`).

`layout_problems` lists every missing or unfinished part, each naming its file, so
`sreforge scenarios validate` refuses a folder a run or a qualification would trip on
later (no fault, no fix, fewer than two negatives, a scaffold placeholder left in).
"""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts._scenario import Scenario

__all__ = ["MIN_NEGATIVES", "ROOT_CAUSE_HEADING", "SCAFFOLD_MARK", "layout_problems"]

SCAFFOLD_MARK = "TODO(scaffold)"
"""Written by `sreforge scenarios new` wherever the author still has to write something."""
ROOT_CAUSE_HEADING = "## Root cause (harness-internal)"
MIN_NEGATIVES = 2
_FIXTURES = (".patch", ".sh")
_TEXT_SUFFIXES = {".md", ".toml", ".env", ".patch", ".sh", ".py", ".txt", ".yml", ".yaml", ""}


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _placeholders(folder: Path) -> list[str]:
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix in _TEXT_SUFFIXES and SCAFFOLD_MARK in _text(path):
            found.append(f"{path.relative_to(folder)}: a {SCAFFOLD_MARK} placeholder is left")
    return found


def layout_problems(scenario: Scenario) -> list[str]:
    """Every part the folder lacks, as `<file>: <problem>` (empty: the layout is complete)."""
    problems = []
    page = scenario.trigger_page
    if not _text(page).strip():
        problems.append(f"{page.name}: missing or empty (the page the agent receives)")
    fix = scenario.solution_dir / "fix.patch"
    if not fix.is_file():
        problems.append("solution/fix.patch: missing (the reference fix)")
    oracle = scenario.verify_dir / "oracle.md"
    if ROOT_CAUSE_HEADING not in _text(oracle):
        problems.append(f"verify/oracle.md: missing, or without a `{ROOT_CAUSE_HEADING}` section")
    if scenario.manifest.profile == "incident":
        if scenario.env is None:
            problems.append("environment/scenario.env: missing (delivery mode, load profile)")
        runtime_only = scenario.env is not None and (
            scenario.env.delivery_mode == "arm-runtime-notrace"
        )
        if not runtime_only and not list(scenario.inject_dir.glob("*.patch")):
            problems.append("inject/: no *.patch (the fault, as `git format-patch` commits)")
        negative = scenario.negative_dir
        count = (
            len([p for p in negative.glob("*") if p.suffix in _FIXTURES])
            if negative.is_dir()
            else 0
        )
        if count < MIN_NEGATIVES:
            problems.append(
                f"verify/negative/: {count} fixture(s), at least {MIN_NEGATIVES} needed "
                "(known-bad fixes a lazy or misled agent would submit)"
            )
    return problems + _placeholders(scenario.path)
