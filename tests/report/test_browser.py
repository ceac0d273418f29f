"""Reports opened in a real headless Chromium: the charts are drawn and nothing complains.

The pages carry a Content-Security-Policy that forbids every fetch and every script, so a
report that tried to load anything from anywhere would log a console message here.
`SREFORGE_REPORT_SCREENSHOTS=docs/img` copies the screenshots into the docs.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from headless import chromium, open_page
from reportfixtures import write_campaign, write_run

from sreforge.report import load_run, render_run, write_report

__all__ = ["chromium"]

RUN_ID = "20261129-080000-abc123"
CAMPAIGN_ID = "20261129-090000-c0ffee"

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runs/ and campaigns/ tree with one run and one finished campaign."""
    monkeypatch.setenv("SREFORGE_RECORDER_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("SREFORGE_CAMPAIGNS_DIR", str(tmp_path / "campaigns"))
    write_run(tmp_path / "runs", RUN_ID)
    write_campaign(tmp_path / "campaigns", tmp_path / "runs", CAMPAIGN_ID)
    return tmp_path


def _keep(screenshot: Path) -> None:
    target = os.environ.get("SREFORGE_REPORT_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, Path(target) / screenshot.name)


def test_run_report_draws_sli_and_load_charts_with_markers(chromium: str, folders: Path) -> None:
    """The run page shows both vantage points, the alert band and every milestone."""
    page = write_report(RUN_ID)
    shot = folders / "report-run.png"
    loaded = open_page(chromium, page.as_uri(), folders / "profile", screenshot=shot, height=2600)
    assert loaded.console == []
    assert loaded.dom.count('<svg class="chart line-chart"') == 2
    assert loaded.dom.count('class="band"') >= 2  # alert firing, before and in the window
    for marker in ("fault armed", "alert fired", "hand-off", "submitted", "CI", "deployed",
                   "cleared"):  # fmt: skip
        assert f"<title>{marker} at " in loaded.dom, marker
    assert "app SLI" in loaded.dom
    assert "load generator p99" in loaded.dom
    assert "<polyline" in loaded.dom
    assert "cache.delete_many" in loaded.dom  # the diff
    assert "tool call" in loaded.dom
    assert "model call" in loaded.dom
    _keep(shot)


def test_campaign_report_draws_cdf_scatter_and_links_every_run(
    chromium: str, folders: Path
) -> None:
    """The campaign page has its charts, one row per agent x scenario, and live run links."""
    page = write_report(CAMPAIGN_ID)
    shot = folders / "report-campaign.png"
    loaded = open_page(chromium, page.as_uri(), folders / "profile", screenshot=shot, height=2200)
    assert loaded.console == []
    assert '<svg class="chart cdf-chart"' in loaded.dom
    assert loaded.dom.count('<g class="cdf">') == 3  # one curve per agent
    assert loaded.dom.count('<g class="dot">') == 3
    assert loaded.dom.count("run-link") == 9  # the trials whose records are here
    for href in _hrefs(loaded.dom):
        assert (page.parent / href).resolve().is_file(), href
    _keep(shot)


def test_a_page_that_fetches_something_is_caught(chromium: str, tmp_path: Path) -> None:
    """The console check is not vacuous: a planted external image shows up as a message."""
    page = tmp_path / "bad.html"
    folder = write_run(tmp_path / "runs", RUN_ID)
    html = render_run(load_run(folder)).replace(
        "<main>", '<main><img src="http://example.invalid/x.png">'
    )
    page.write_text(html)
    loaded = open_page(chromium, page.as_uri(), tmp_path / "profile")
    assert any("example.invalid" in message for message in loaded.console)


def _hrefs(dom: str) -> list[str]:
    return re.findall(r'class="run-link" href="([^"]+)"', dom)
