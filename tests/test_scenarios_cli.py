"""`sreforge scenarios list|validate|new` on a copy of the catalog: the table's columns,
what validate refuses (naming each file), and the scaffold an author starts from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sreforge.cli import main

REPO = Path(__file__).resolve().parents[1]
SOURCE = "latency-cache-stampede"


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the bookshelf use case (scenarios and stack) as the engine's `use-cases/`."""
    root = tmp_path / "use-cases"
    shutil.copytree(REPO / "use-cases" / "bookshelf", root / "bookshelf",
                    ignore=shutil.ignore_patterns("records", "__pycache__", "tests"))  # fmt: skip
    monkeypatch.setenv("SREFORGE_USE_CASES", str(root))
    return root / "bookshelf" / "scenarios"


def test_list_shows_family_difficulty_delivery_and_qualification(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every scenario folder, with its manifest's family and difficulty, its scenario.env's
    delivery mode and what its headroom.md says (none: not qualified)."""
    (catalog / SOURCE / "verify" / "headroom.md").write_text(f"# {SOURCE}: DISQUALIFIED\n")
    assert main(["scenarios", "list", "--json"]) == 0
    rows = {row["id"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(rows) == {p.name for p in catalog.iterdir() if p.is_dir()}
    stampede = rows[SOURCE]
    assert (stampede["family"], stampede["difficulty"], stampede["delivery"]) == (
        "latency", "easy", "arm-deploy-recent",
    )  # fmt: skip
    assert stampede["qualification"] == "DISQUALIFIED"
    (catalog / SOURCE / "verify" / "headroom.md").unlink()
    assert main(["scenarios", "list"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:6] == [
        "ID",
        "PROFILE",
        "FAMILY",
        "DIFFICULTY",
        "DELIVERY",
        "QUALIFICATION",
    ]
    (line,) = [line for line in lines if line.startswith(SOURCE + " ")]
    assert "not qualified" in line


def test_validate_names_each_missing_part(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped folder validates; without its fix, with one negative left and without
    the root-cause section, validate exits 1 naming each file."""
    folder = catalog / SOURCE
    assert main(["scenarios", "validate", str(folder)]) == 0
    (folder / "solution" / "fix.patch").unlink()
    next((folder / "verify" / "negative").glob("*.patch")).unlink()
    oracle = folder / "verify" / "oracle.md"
    oracle.write_text(oracle.read_text().replace("## Root cause (harness-internal)", "## Cause"))
    capsys.readouterr()
    assert main(["scenarios", "validate", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "solution/fix.patch: missing" in out
    assert "verify/negative/: 1 fixture(s), at least 2 needed" in out
    assert "verify/oracle.md: missing, or without a `## Root cause (harness-internal)`" in out


def test_validate_takes_a_scenario_id_as_the_other_verbs_do(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`validate <id>` finds the folder under the use cases (as `stack up`, `guard` and
    `qualify` do) and judges that folder; an id nobody has is refused by name."""
    assert main(["scenarios", "validate", SOURCE]) == 0
    assert str(catalog / SOURCE) in capsys.readouterr().out
    (catalog / SOURCE / "solution" / "fix.patch").unlink()
    assert main(["scenarios", "validate", SOURCE]) == 1
    assert "solution/fix.patch: missing" in capsys.readouterr().out
    assert main(["scenarios", "validate", "no-such-scenario"]) == 1
    assert "no scenario 'no-such-scenario'" in capsys.readouterr().err


def test_validate_lints_the_stack_rules_an_incident_pages_on(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate runs the rules lint before any run: an alert of the stack without its
    `service` label, and a scenario whose paging alert the stack does not have, are named
    with the rules file; the patch scenario, paged by nothing, is not held to them."""
    rules = catalog.parent / "stacks" / "bookshelf-flask" / "observability" / "rules.yml"
    text = rules.read_text()
    rules.write_text(
        text.replace("          service: bookmeta\n", "", 1).replace(
            "alert: BookshelfApiLatencyP99High", "alert: BookshelfApiP99High"
        )
    )
    assert main(["scenarios", "validate", SOURCE]) == 1
    out = capsys.readouterr().out
    assert f"{rules}: alert 'BookmetaErrorsElevated' has no `service` label" in out
    assert f"{rules}: no alert 'BookshelfApiLatencyP99High'" in out
    assert main(["scenarios", "validate", "bad-deploy-5xx"]) == 1  # pages on the 5xx rule
    out = capsys.readouterr().out
    assert "BookmetaErrorsElevated" in out
    assert "no alert" not in out
    assert main(["scenarios", "validate", "patch-stale-sort-keys"]) == 0
    rules.write_text(text)
    assert main(["scenarios", "validate"]) == 0


def test_new_scaffolds_a_folder_validate_refuses_until_it_is_written(
    catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scenarios new`: the source's stack binding, the given family and difficulty, every
    part to write marked; validate refuses it; with the parts written (here the source's
    own) and no mark left, it validates and lists."""
    assert main(["scenarios", "new", "slow-sort", "--from", SOURCE,
                 "--family", "saturation", "--difficulty", "hard"]) == 0  # fmt: skip
    folder = catalog / "slow-sort"
    manifest = (folder / "scenario.toml").read_text()
    assert 'id         = "slow-sort"' in manifest
    assert 'family     = "saturation"' in manifest
    assert 'difficulty = "hard"' in manifest
    assert "BookshelfApiLatencyP99High" in manifest  # the binding, for the author to review
    assert (folder / "environment" / "scenario.env").read_text() == (
        catalog / SOURCE / "environment" / "scenario.env"
    ).read_text()
    capsys.readouterr()
    assert main(["scenarios", "validate", str(folder)]) == 1
    out = capsys.readouterr().out
    for part in ("trigger.md: a TODO(scaffold)", "scenario.toml: a TODO(scaffold)",
                 "inject/: no *.patch", "solution/fix.patch: missing"):  # fmt: skip
        assert part in out
    for name in ("trigger.md", "README.md", "inject", "solution", "verify"):
        target = folder / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
        copy = shutil.copytree if (catalog / SOURCE / name).is_dir() else shutil.copyfile
        copy(catalog / SOURCE / name, target)
    (folder / "verify" / "headroom.md").unlink()
    text = (folder / "scenario.toml").read_text()
    (folder / "scenario.toml").write_text(
        text.replace("TODO(scaffold): a one-line title", "Sorting").replace("TODO(scaffold)", "x")
    )
    assert main(["scenarios", "validate", str(folder)]) == 0
    assert main(["scenarios", "list", "--json"]) == 0
    rows = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert {
        "id": "slow-sort",
        "family": "saturation",
        "qualification": "not qualified",
    }.items() <= next(row for row in rows if row["id"] == "slow-sort").items()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["scenarios", "new", "Bad_Id"], "id: 'Bad_Id' must match"),
        (["scenarios", "new", SOURCE], f"id: '{SOURCE}' is taken"),
        (["scenarios", "new", "fresh", "--from", "no-such"], "--from: no valid incident scenario"),
        (["scenarios", "new", "fresh", "--family", "Bad Family"], "--family: 'Bad Family'"),
    ],
)
def test_new_refuses_bad_input_naming_the_field(
    catalog: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    """A bad or taken id, an unknown source, a bad family: exit 2, the field named, nothing
    written."""
    before = sorted(p.name for p in catalog.iterdir())
    assert main(argv) == 2
    assert named in capsys.readouterr().err
    assert sorted(p.name for p in catalog.iterdir()) == before
