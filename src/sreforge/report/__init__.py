"""Results people look at: HTML reports of runs and campaigns, and terminal views.

`sreforge report RUN_ID|CAMPAIGN_ID` writes one self-contained page (inline SVG, no
script, nothing fetched); `sreforge show RUN_ID` and `sreforge runs` print to the terminal.
Rendering is pure (records in, text out); `_load` reads folders, `_cli` writes files.
"""

from sreforge_report._load import ReportError, load_campaign, load_run
from sreforge_report._run_page import render_run

from sreforge.report._campaign_page import render_campaign
from sreforge.report._cli import add_report_commands, write_report

__all__ = [
    "ReportError",
    "add_report_commands",
    "load_campaign",
    "load_run",
    "render_campaign",
    "render_run",
    "write_report",
]
