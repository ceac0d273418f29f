"""SREForge's run pages, the live dashboard app and the RCA judge.

Shared by the CLI (`sreforge report`, `show`, `judge`, `dashboard`) and the recorder
service, which serves the dashboard and judges each recorded run; services cannot import
the `sreforge` package, so what both need lives here. Rendering is pure (records in, HTML
out); `_load` reads run folders; `_judge` writes `diagnosis.json` beside a record.
"""

from sreforge_report._dashboard import create_dashboard, dashboard_token
from sreforge_report._judge import JudgeSettings, NotJudged, judge_run, root_cause
from sreforge_report._load import (
    CampaignBundle,
    ReportError,
    RunBundle,
    campaigns_dir,
    load_campaign,
    load_run,
    runs_dir,
)
from sreforge_report._prompt import addresses_grader, messages, parse_grade
from sreforge_report._run_page import milestones, render_run

__all__ = [
    "CampaignBundle",
    "JudgeSettings",
    "NotJudged",
    "ReportError",
    "RunBundle",
    "addresses_grader",
    "campaigns_dir",
    "create_dashboard",
    "dashboard_token",
    "judge_run",
    "load_campaign",
    "load_run",
    "messages",
    "milestones",
    "parse_grade",
    "render_run",
    "root_cause",
    "runs_dir",
]
