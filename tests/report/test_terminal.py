"""`sreforge show` and `sreforge runs`: a run and the recent runs, readable in a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from reportfixtures import write_run

from sreforge.cli import main
from sreforge.report._terminal import sparkline

RUN_ID = "20261129-080000-abc123"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runs/ folder with a passed run, a failed one, and a folder without a record."""
    root = tmp_path / "runs"
    monkeypatch.setenv("SREFORGE_RECORDER_RUNS_DIR", str(root))
    write_run(root, RUN_ID)
    write_run(root, "20261129-090000-def456", agent="noop", passed=False)
    (root / "20261129-100000-inflight").mkdir()
    return root


def test_sparkline_scales_to_the_range_and_leaves_gaps() -> None:
    """A missing sample is a gap, not a zero; long series are downsampled."""
    assert sparkline([0.0, 0.5, 1.0, None, 1.0]) == "▁▅█ █"
    assert sparkline([None, None]) == ""
    assert len(sparkline([float(i) for i in range(500)], width=40)) == 40


def test_show_prints_verdict_phases_milestones_sli_and_artifacts(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Everything an operator needs from one run, without opening a file."""
    assert main(["show", RUN_ID]) == 0
    out = capsys.readouterr().out
    assert "verdict: passed (smoke, time scale 0.1)" in out
    assert "✓ time_to_clear" in out
    assert "redeploy       9.0s" in out
    assert "total        208.0s" in out
    for milestone in ("fault armed", "hand-off", "deployed", "cleared"):
        assert milestone in out
    assert "deployed     +   95.0s" in out
    assert "cleared      +  110.0s" in out
    assert "▁" in out  # the sparkline
    assert "!" in out  # the alert state line
    assert f"artifacts in {runs / RUN_ID}:" in out
    assert "  events.jsonl" in out


def test_show_of_a_run_without_record_says_so(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run still in flight has no record: the CLI says so and exits 2."""
    assert main(["show", "20261129-100000-inflight"]) == 2
    assert "no record" in capsys.readouterr().err


def test_runs_lists_newest_first_and_filters(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Folders without a record are left out; filters combine."""
    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["20261129-090000-def456", RUN_ID]
    assert main(["runs", "--verdict", "passed"]) == 0
    out = capsys.readouterr().out
    assert RUN_ID in out
    assert "def456" not in out
    assert main(["runs", "--agent", "nobody"]) == 0
    assert "no runs" in capsys.readouterr().out


def test_report_of_an_unknown_id_names_both_places(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error says where it looked for a run and for a campaign."""
    assert main(["report", "nothing-here"]) == 2
    err = capsys.readouterr().err
    assert "neither a run" in err
    assert "summary.json" in err


def test_report_writes_the_page_where_asked(runs: Path, tmp_path: Path) -> None:
    """`-o` picks the file; the page links nowhere outside itself."""
    target = tmp_path / "out" / "run.html"
    assert main(["report", RUN_ID, "-o", str(target)]) == 0
    html = target.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_a_real_run_folder_renders_in_both_views(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trimmed copy of a real `reference` run's folder (every 6th SLI sample kept)."""
    fixtures = Path(__file__).parent / "fixtures" / "runs"
    monkeypatch.setenv("SREFORGE_RECORDER_RUNS_DIR", str(fixtures))
    run_id = "20261201-231359-477c2a"
    assert main(["show", run_id]) == 0
    out = capsys.readouterr().out
    assert "verdict: passed" in out
    assert "client_sli_held" in out
    assert "deployed     +   77.0s" in out
    target = tmp_path / "real.html"
    assert main(["report", run_id, "-o", str(target)]) == 0
    html = target.read_text()
    assert html.count('<svg class="chart line-chart"') == 2
    assert "<title>cleared at " in html
