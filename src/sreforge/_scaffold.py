"""`sreforge scenarios new <id>`: a new scenario folder, its stack binding copied from an
existing scenario and every part the author must write marked `TODO(scaffold)`.

`sreforge scenarios validate` refuses the folder until no mark is left and every part
exists (the fault, the fix, two negatives, the root cause); then `guard`, whole runs and
`qualify` (docs/scenarios.md, "How to add a scenario").
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

from sreforge_contracts import (
    ROOT_CAUSE_HEADING,
    SCAFFOLD_MARK,
    ContractError,
    Scenario,
    default_use_cases,
    load_scenario,
)

from sreforge._errors import SreforgeError

__all__ = ["ScaffoldError", "add_new_command", "scaffold"]

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_FAMILY = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_TODO = SCAFFOLD_MARK
_PAGE = f"""# {_TODO}: the page's title, as the paging system would word it

{_TODO}: what an on-call engineer is told when paged: the symptom users see, since
when, which service. Neutral: no cause, no fix, no alert name (the agent finds the
firing alert in Alertmanager), no harness words.
"""
_ORACLE = f"""# {{id}}: oracle notes

{_TODO}: what mitigation looks like from outside (the alert clears and stays clear under
the same load, answers stay complete and correct).

{ROOT_CAUSE_HEADING}

{_TODO}: the fault, where it lives, why it pages, and what a correct fix changes. Never
shown to the agent.
"""
_REFERENCE = f"""# The reference fix

{_TODO}: what `fix.patch` changes and why; say whether it is a revert (at least three
scenarios of the catalog need a fix that is not).
"""
_README = f"""# {{id}}

{_TODO}: the scenario for a reader of the catalog: the fault, how it is delivered, what a
lazy fix tries and why it fails, and the whole runs that prove it.
"""
_NEGATIVES = f"""{_TODO}: put at least two known-bad fixes here, each `<name>.patch` (or a
`<name>.sh` session script): what a lazy or misled agent would plausibly submit. Each
must fail (`sreforge run {{id}} --agent scripted:<name>`). Delete this file.
"""
_INJECT = f"""{_TODO}: put the fault here as `git format-patch` commits against the stack's
`app/`, by a plausible author with a plausible message. Delete this file.
"""


class ScaffoldError(SreforgeError):
    """A scaffold that cannot be written (bad id, taken id, no such source)."""


def add_new_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `scenarios new`."""
    new = verbs.add_parser("new", help="scaffold a scenario folder (then validate, guard, qualify)")
    new.add_argument("id", help="the new scenario's id (^[a-z0-9][a-z0-9-]*$)")
    new.add_argument("--from", dest="source", help="the scenario whose stack binding to copy")
    new.add_argument("--family", default="latency", help="incident family (default latency)")
    new.add_argument("--difficulty", choices=("easy", "medium", "hard"), default="medium")
    new.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    folder = scaffold(default_use_cases(), args.id, args.source, args.family, args.difficulty)
    print(f"scaffolded {folder}")
    print("next: fill every TODO(scaffold), then")
    print(f"  sreforge scenarios validate {folder}")
    print(f"  sreforge guard {args.id}")
    print(f"  sreforge run {args.id} --agent reference --time-scale 0.1   (and noop, negatives)")
    print(f"  sreforge qualify {args.id}")
    return 0


def _source(root: Path, name: str | None) -> Scenario:
    folders = sorted(root.glob(f"*/scenarios/{name or '*'}"))
    for folder in folders:
        try:
            scenario = load_scenario(folder)
        except ContractError:
            continue
        if scenario.manifest.profile == "incident":
            return scenario
    raise ScaffoldError(f"--from: no valid incident scenario {name or ''} under {root}".strip())


def _manifest(text: str, new_id: str, family: str, difficulty: str) -> str:
    """The source's manifest with its identity replaced and its title, tags and
    description left for the author."""
    text = re.sub(r'(?s)^description\s*=\s*""".*?"""', f'description = """\n{_TODO}\n"""',
                  text, count=1, flags=re.M)  # fmt: skip
    for key, value in (("id", f'"{new_id}"'), ("title", f'"{_TODO}: a one-line title"'),
                       ("family", f'"{family}"'), ("difficulty", f'"{difficulty}"'),
                       ("tags", "[]")):  # fmt: skip
        text = re.sub(
            rf"(?m)^{key}(\s*)=\s*(\"[^\"]*\"|\[[^\]]*\])", rf"{key}\1= {value}", text, count=1
        )
    return text


def scaffold(root: Path, new_id: str, source: str | None, family: str, difficulty: str) -> Path:
    """Write `<root>/<use case>/scenarios/<new_id>/` from `source` (default: the first
    valid incident scenario); `ScaffoldError` names the bad argument."""
    if not _ID.match(new_id):
        raise ScaffoldError(f"id: {new_id!r} must match {_ID.pattern}")
    if not _FAMILY.match(family):
        raise ScaffoldError(f"--family: {family!r} must match {_FAMILY.pattern}")
    taken = sorted(root.glob(f"*/scenarios/{new_id}"))
    if taken:
        raise ScaffoldError(f"id: {new_id!r} is taken ({taken[0]})")
    origin = _source(root, source)
    folder = origin.path.parent / new_id
    (folder / "environment").mkdir(parents=True)
    manifest = _manifest(origin.manifest_path.read_text(), new_id, family, difficulty)
    (folder / "scenario.toml").write_text(manifest)
    if origin.env_path.is_file():
        shutil.copyfile(origin.env_path, folder / "environment" / "scenario.env")
    files = {
        "trigger.md": _PAGE, "README.md": _README, "solution/reference-fix.md": _REFERENCE,
        "verify/oracle.md": _ORACLE, "verify/negative/README.md": _NEGATIVES,
        "inject/README.md": _INJECT,
    }  # fmt: skip
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text.replace("{id}", new_id))
    return folder
