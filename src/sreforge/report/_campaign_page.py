"""A campaign's report page: agent x scenario statistics, time-to-clear CDFs, cost vs pass
rate, per-scenario difficulty, and a link to every trial's run report. Pure.

The statistics are the campaign's own (`summary.json`, from `sreforge.campaign._stats`);
this page only draws them, plus what it reads off the result lines (clear times, costs).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from sreforge_report._html import page, pill, section, table
from sreforge_report._load import CampaignBundle
from sreforge_report._svg import Point, cdf_chart, scatter_chart

from sreforge.campaign._stats import COUNTED

__all__ = ["agent_colors", "render_campaign"]

_PALETTE = ("#2471a3", "#c0392b", "#1e8449", "#8e44ad", "#d35400", "#117a65", "#7f8c8d")

RunLink = Callable[[str], str | None]
"""A run id → the href of its report (None: no report for it)."""


def agent_colors(agents: Sequence[str]) -> dict[str, str]:
    """One stable colour per agent, in the spec's order."""
    return {agent: _PALETTE[i % len(_PALETTE)] for i, agent in enumerate(agents)}


def render_campaign(bundle: CampaignBundle, run_link: RunLink) -> str:
    """The whole page for one campaign folder; `run_link` says where each run's page is."""
    summary = bundle.summary
    spec: Mapping[str, Any] = summary.get("spec", {})
    agents = list(spec.get("agents") or sorted({r["agent"] for r in bundle.results}))
    colors = agent_colors(agents)
    trials = summary.get("trials", {})
    smoke = spec.get("time_scale", 1.0) < 1
    subtitle = (
        f"{len(agents)} agents x {len(spec.get('scenarios', ()))} scenarios x "
        f"{spec.get('trials', '?')} trials · {trials.get('finished', 0)}/"
        f"{trials.get('planned', 0)} finished · {trials.get('errors', 0)} errors"
        + (f" · smoke (time scale {spec.get('time_scale')})" if smoke else "")
    )
    k = int(spec.get("k") or spec.get("trials") or 1)
    sections = [
        _groups(summary.get("groups", []), k),
        _charts(bundle.results, agents, colors),
        _difficulty(summary.get("groups", []), list(spec.get("scenarios", ()))),
        _comparisons(summary.get("comparisons", [])),
        _trials(bundle.results, run_link),
    ]
    return page(f"Campaign {summary.get('campaign_id', bundle.folder.name)}", subtitle, sections)


def _groups(groups: Sequence[Mapping[str, Any]], k: int) -> str:
    rows = []
    for group in groups:
        n = int(group.get("n") or 0)
        kk = str(min(k, n)) if n else ""
        rows.append([
            escape(str(group["agent"])), escape(str(group["scenario"])),
            f"\x00num{group.get('passed', 0)}/{n}", "\x00num" + _pct(group.get("pass_rate")),
            "\x00num" + _pct(group.get("pass_at", {}).get(kk)),
            "\x00num" + _pct(group.get("pass_hat", {}).get(kk)),
            "\x00num" + _mean_se(group.get("mean_score"), group.get("score_stderr")),
            "\x00num" + _seconds(group.get("median_clear_s")),
            "\x00num" + _usd(group.get("mean_cost_usd")),
            f"\x00num{group.get('not_counted', 0)}",
        ])  # fmt: skip
    headers = ["agent", "scenario", "passed", "pass rate", f"pass@{k}", f"pass^{k}",
               "score mean ± s.e.", "median clear", "mean cost", "not counted"]  # fmt: skip
    note = (
        '<p class="muted">pass@k: at least one of k trials passes (unbiased estimator); '
        "pass^k: all k pass. Aborted and error trials are not counted.</p>"
    )
    return section("Agent x scenario", table(headers, rows, css="groups") + note)


def _charts(results: Sequence[Mapping[str, Any]], agents: list[str], colors: dict[str, str]) -> str:
    counted = [r for r in results if r.get("verdict") in COUNTED]
    clears: dict[str, Sequence[float]] = {
        agent: [float(r["time_to_clear_s"]) for r in counted
                if r["agent"] == agent and r.get("time_to_clear_s") is not None]
        for agent in agents
    }  # fmt: skip
    totals = {agent: sum(r["agent"] == agent for r in counted) for agent in agents}
    cdf = cdf_chart(clears, colors, title="Time to clear, per agent (CDF over counted trials)",
                    totals=totals)  # fmt: skip
    points = []
    for agent in agents:
        mine = [r for r in counted if r["agent"] == agent]
        costs = [float(r["cost_usd"]) for r in mine if r.get("cost_usd") is not None]
        if not mine:
            continue
        rate = sum(r["verdict"] == "passed" for r in mine) / len(mine)
        points.append(Point(agent, statistics.fmean(costs) if costs else 0.0, rate, colors[agent]))
    scatter = scatter_chart(
        points, title="Cost vs pass rate, per agent", x_label="mean cost per trial (USD)",
        y_label="pass rate",
    )  # fmt: skip
    note = (
        '<p class="muted">An agent whose cost was not counted (no model calls, or unpriced) '
        "sits at 0. A counted trial that never cleared keeps its agent's CDF below 1 by its "
        "share.</p>"
    )
    return section("Time to clear and cost", cdf + scatter + note)


def _difficulty(groups: Sequence[Mapping[str, Any]], scenarios: list[str]) -> str:
    rows = []
    for scenario in scenarios or sorted({str(g["scenario"]) for g in groups}):
        mine = [g for g in groups if g["scenario"] == scenario and g.get("n")]
        passing = sum(1 for g in mine if (g.get("passed") or 0) > 0)
        rates = [float(g["pass_rate"]) for g in mine if g.get("pass_rate") is not None]
        mean = statistics.fmean(rates) if rates else None
        bar = round((mean or 0) * 100)
        rows.append([
            escape(scenario), f"\x00num{passing}/{len(mine)}", "\x00num" + _pct(mean),
            f'<svg class="bar" width="120" height="12" xmlns="http://www.w3.org/2000/svg">'
            f'<rect width="120" height="12" fill="#eee"/>'
            f'<rect width="{bar * 1.2:.0f}" height="12" fill="#2471a3"/></svg>',
            escape(_bucket(mean)),
        ])  # fmt: skip
    headers = ["scenario", "agents passing it", "mean pass rate", "", "difficulty"]
    return section("Per-scenario difficulty", table(headers, rows, css="difficulty"))


def _comparisons(comparisons: Sequence[Mapping[str, Any]]) -> str:
    if not comparisons:
        return ""
    rows = [
        [escape(f"{c['a']} - {c['b']}"), f"\x00num{c['scenarios']}",
         f"\x00num{c['difference']:+.0%}", f"\x00num[{c['low']:+.0%}, {c['high']:+.0%}]",
         escape(str(c["method"]))]
        for c in comparisons
    ]  # fmt: skip
    headers = ["agents", "scenarios", "pass-rate difference", "95% interval", "method"]
    return section("A/B comparisons", table(headers, rows))


def _trials(results: Sequence[Mapping[str, Any]], run_link: RunLink) -> str:
    rows = []
    for result in sorted(results, key=lambda r: (r["scenario"], r["agent"], r["trial"])):
        run_id = result.get("run_id")
        href = run_link(run_id) if run_id else None
        name = escape(run_id or "—")
        cell = f'<a class="run-link" href="{escape(href)}">{name}</a>' if href else name
        rows.append([
            escape(str(result["agent"])), escape(str(result["scenario"])),
            f"\x00num{result['trial']}", pill(str(result["verdict"])),
            "\x00num" + (f"{result['score']:.2f}" if result.get("score") is not None else ""),
            "\x00num" + _seconds(result.get("time_to_clear_s")),
            "\x00num" + _usd(result.get("cost_usd")), cell,
            escape(str(result.get("reason") or "")),
        ])  # fmt: skip
    headers = ["agent", "scenario", "trial", "verdict", "score", "clear", "cost", "run", "reason"]
    return section("Trials", table(headers, rows, css="trials"))


def _bucket(rate: float | None) -> str:
    if rate is None:
        return "no counted trials"
    if rate == 0:
        return "unsolved"
    return "hard" if rate < 0.34 else "medium" if rate < 0.67 else "easy"


def _pct(value: Any) -> str:
    return f"{float(value):.0%}" if isinstance(value, int | float) else ""


def _mean_se(mean: Any, stderr: Any) -> str:
    if not isinstance(mean, int | float):
        return ""
    return f"{mean:.2f} ± {stderr:.2f}" if isinstance(stderr, int | float) else f"{mean:.2f}"


def _seconds(value: Any) -> str:
    return f"{float(value):.1f}s" if isinstance(value, int | float) else ""


def _usd(value: Any) -> str:
    return f"${float(value):.4f}" if isinstance(value, int | float) else ""
