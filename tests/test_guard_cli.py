"""`sreforge guard`: exit 0 clean, 1 on a hit, 2 on a usage or setup error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sreforge.cli import main

BOOKSHELF = Path(__file__).resolve().parents[1] / "use-cases" / "bookshelf"


def test_an_unknown_scenario_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """No stack is started for a scenario that does not exist; exit 2 names it."""
    assert main(["guard", "no-such-scenario"]) == 2
    assert "no-such-scenario" in capsys.readouterr().err


def test_a_bad_time_scale_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """The time scale is checked before anything starts."""
    assert main(["guard", "latency-cache-stampede", "--time-scale", "2"]) == 2
    assert "time_scale" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_planted_page_tell_is_the_only_hit_on_the_live_bookshelf_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real stack comes up and every surface is scanned: with a harness word planted in
    the scenario's trigger page, that page is the one hit (exit 1), so the workspace, its
    git store, the endpoints and the sandbox of `latency-cache-stampede` are clean."""
    use_case = tmp_path / "bookshelf"
    shutil.copytree(BOOKSHELF, use_case, ignore=shutil.ignore_patterns("__pycache__", ".*cache"))
    scenario = use_case / "scenarios" / "latency-cache-stampede"
    trigger = scenario / "trigger.md"
    trigger.write_text(trigger.read_text() + "\nThe oracle is watching.\n")
    code = main(["guard", str(scenario), "--time-scale", "0.2", "--json"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    report = json.loads(captured.out)
    assert report["clean"] is False
    assert {(hit["what"], hit["where"]) for hit in report["hits"]} == {
        ("harness word 'oracle'", "page")
    }, report
    assert report["surfaces"]["sandbox"] > 0  # probed from inside, not skipped
    assert report["surfaces"]["endpoints"] > 0


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_patch_scenario_is_guarded_without_a_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A patch scenario has no alert and no stack: its workspace at the base commit, its
    task page and the sandbox are scanned; a harness word planted on the page is the one
    hit (exit 1)."""
    use_case = tmp_path / "bookshelf"
    shutil.copytree(BOOKSHELF, use_case, ignore=shutil.ignore_patterns("__pycache__", ".*cache"))
    scenario = use_case / "scenarios" / "patch-stale-sort-keys"
    trigger = scenario / "trigger.md"
    trigger.write_text(trigger.read_text() + "\nThe oracle is watching.\n")
    code = main(["guard", str(scenario), "--json"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    report = json.loads(captured.out)
    assert {(hit["what"], hit["where"]) for hit in report["hits"]} == {
        ("harness word 'oracle'", "page")
    }, report
    assert report["surfaces"]["workspace"] > 0
    assert report["surfaces"]["sandbox"] > 0
