"""`sreforge report`, `sreforge show` and `sreforge runs`: the results, as a page or in the
terminal. The only module here that writes files."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from sreforge_report._load import (
    ReportError,
    campaigns_dir,
    load_campaign,
    load_run,
    runs_dir,
)
from sreforge_report._run_page import render_run

from sreforge.report._campaign_page import render_campaign
from sreforge.report._terminal import format_run, format_runs, list_runs

__all__ = ["add_report_commands", "write_report"]


def add_report_commands(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `report`, `show` and `runs`."""
    report = verbs.add_parser(
        "report",
        help="write one self-contained HTML report of a run or a campaign",
        description="Write an HTML page (no network needed to open it) for RUN_ID (a folder "
        "under SREFORGE_RECORDER_RUNS_DIR, default runs/) or CAMPAIGN_ID (under "
        "SREFORGE_CAMPAIGNS_DIR, default campaigns/). A campaign's report also writes each "
        "of its runs' reports and links to them.",
    )
    report.add_argument("id", metavar="RUN_ID|CAMPAIGN_ID")
    report.add_argument("-o", "--output", type=Path, help="the file to write "
                        "(default: report.html in the run's or campaign's folder)")  # fmt: skip
    report.set_defaults(handler=_report)

    show = verbs.add_parser("show", help="one run in the terminal: verdict, phases, SLI")
    show.add_argument("run_id", metavar="RUN_ID")
    show.set_defaults(handler=_show)

    runs = verbs.add_parser("runs", help="recent runs, newest first")
    runs.add_argument("--scenario", help="only runs of this scenario")
    runs.add_argument("--agent", help="only runs of this agent")
    runs.add_argument("--verdict", help="only runs with this verdict")
    runs.add_argument("-n", "--limit", type=int, default=20, help="at most this many (20)")
    runs.set_defaults(handler=_runs)

    dashboard = verbs.add_parser(
        "dashboard",
        help="serve the live dashboard on loopback (runs in flight, event stream, reports)",
        description="Serve the live dashboard over the recorder's run folders "
        "(SREFORGE_RECORDER_RUNS_DIR): runs in flight with their phase and elapsed time, "
        "the live event stream (SSE), verdicts and report links. Every page wants the "
        "operator's token (SREFORGE_DASHBOARD_TOKEN, else derived from this engine home's "
        "operator credential); the URL printed carries it.",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="listen address (loopback)")
    dashboard.add_argument("--port", type=int, default=8787, help="listen port (8787)")
    dashboard.set_defaults(handler=_dashboard)


def write_report(identifier: str, output: Path | None = None) -> Path:
    """Write the report of run or campaign `identifier`; return the file written."""
    run_folder = runs_dir() / identifier
    if (run_folder / "record.json").is_file():
        target = output or run_folder / "report.html"
        _write(target, render_run(load_run(run_folder)))
        return target
    campaign_folder = campaigns_dir() / identifier
    if (campaign_folder / "summary.json").is_file():
        target = output or campaign_folder / "report.html"
        bundle = load_campaign(campaign_folder)
        links = _run_reports(bundle.results, target.parent)
        _write(target, render_campaign(bundle, links.get))
        return target
    raise ReportError(
        f"{identifier}: neither a run ({run_folder}/record.json) "
        f"nor a campaign ({campaign_folder}/summary.json)"
    )


def _run_reports(results: list[dict[str, object]], base: Path) -> dict[str, str]:
    """Write the report of every trial whose record is here; their hrefs from `base`."""
    links: dict[str, str] = {}
    for result in results:
        run_id = result.get("run_id")
        folder = runs_dir() / str(run_id)
        if not isinstance(run_id, str) or not (folder / "record.json").is_file():
            continue
        try:
            page = render_run(load_run(folder))
        except ReportError:
            continue
        target = folder / "report.html"
        _write(target, page)
        links[run_id] = os.path.relpath(target.resolve(), base.resolve())
    return links


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _report(args: argparse.Namespace) -> int:
    path = write_report(args.id, args.output)
    print(f"report: {path}")
    return 0


def _show(args: argparse.Namespace) -> int:
    print(format_run(load_run(runs_dir() / args.run_id)))
    return 0


def _runs(args: argparse.Namespace) -> int:
    rows = list_runs(runs_dir(), scenario=args.scenario, agent=args.agent, verdict=args.verdict)
    print(format_runs(rows[: max(args.limit, 0)]))
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    import uvicorn
    from sreforge_report import create_dashboard

    token = _operator_token()
    print(f"dashboard: http://{args.host}:{args.port}/?token={token}", flush=True)
    app = create_dashboard(runs_dir(), token)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _operator_token() -> str:
    """The operator's dashboard token (see `sreforge._dashboard_wiring`)."""
    from sreforge._dashboard_wiring import operator_token
    from sreforge._settings import EngineSettings

    return operator_token(EngineSettings())
