"""What a campaign shows: the summary (JSON), the table, and the live progress line."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sreforge.campaign._spec import CampaignSpec
from sreforge.campaign._stats import COUNTED, Comparison, GroupStats, compare, summarise
from sreforge.campaign._store import Result, finished_keys, planned_trials

__all__ = ["format_progress", "format_table", "groups_of", "summary"]


def _last(results: Sequence[Result]) -> list[Result]:
    """The standing result of each trial (the last line written for it)."""
    return list({result.key: result for result in results}.values())


def groups_of(spec: CampaignSpec, results: Sequence[Result]) -> list[GroupStats]:
    """The statistics of each agent x scenario, in the file's order (agents, then
    scenarios), over the trials that stand and did not end `error`."""
    standing = [r for r in _last(results) if r.verdict != "error"]
    rows = summarise(r.for_stats() for r in standing)
    agents, scenarios = list(spec.agents), list(spec.scenarios)

    def place(row: GroupStats) -> tuple[int, int]:
        known = row.agent in agents and row.scenario in scenarios
        return (agents.index(row.agent), scenarios.index(row.scenario)) if known else (-1, -1)

    return sorted(rows, key=place)


def _comparisons(spec: CampaignSpec, rows: Sequence[GroupStats]) -> list[Comparison]:
    found = (compare(a, b, rows) for a, b in itertools.combinations(spec.agents, 2))
    return [comparison for comparison in found if comparison is not None]


def summary(campaign_id: str, spec: CampaignSpec, results: Sequence[Result]) -> dict[str, Any]:
    """`summary.json`: the spec, how far the campaign got, one group per agent x scenario
    and an A/B comparison of every pair of agents."""
    rows = groups_of(spec, results)
    groups = []
    for row in rows:
        group = asdict(row)
        group["pass_at"] = {str(k): v for k, v in row.pass_at.items()}
        group["pass_hat"] = {str(k): v for k, v in row.pass_hat.items()}
        groups.append(group)
    planned = planned_trials(spec)
    return {
        "campaign_id": campaign_id,
        "spec": spec.model_dump(mode="json"),
        "trials": {
            "planned": len(planned),
            "finished": len(finished_keys(results) & set(planned)),
            "errors": sum(r.verdict == "error" for r in _last(results)),
        },
        "groups": groups,
        "comparisons": [asdict(c) for c in _comparisons(spec, rows)],
    }


def format_table(campaign_id: str, spec: CampaignSpec, results: Sequence[Result]) -> str:
    """The terminal table: one line per agent x scenario, then the A/B comparisons."""
    rows = groups_of(spec, results)
    k = spec.pass_k
    head = (
        "agent", "scenario", "n", "passed", "pass@1", f"pass@{k}", f"pass^{k}",
        "score ± s.e.", "clear p50/p90", "tokens/run", "cost/run",
    )  # fmt: skip
    body = [
        (
            row.agent,
            row.scenario,
            str(row.n),
            f"{row.passed}/{row.n}",
            _rate(row.pass_at.get(1)),
            _rate(row.pass_at.get(k)),
            _rate(row.pass_hat.get(k)),
            _score(row),
            _clear(row),
            _number(row.mean_tokens, "{:.0f}"),
            _number(row.mean_cost_usd, "${:.2f}"),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    lines = [f"campaign {campaign_id}: {_progress_words(spec, results)}", ""]
    for line in [head, *body]:
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        lines.append("  ".join(cells).rstrip())
    if not_counted := sum(row.not_counted for row in rows):
        lines.append(f"({not_counted} aborted trials not counted in n)")
    for c in _comparisons(spec, rows):
        lines.append(
            f"A/B {c.a} - {c.b}: pass rate {c.difference:+.2f} "
            f"[95% CI {c.low:+.2f}, {c.high:+.2f}] over {c.scenarios} scenario(s), {c.method}"
        )
    return "\n".join(lines)


def _progress_words(spec: CampaignSpec, results: Sequence[Result]) -> str:
    planned = planned_trials(spec)
    done = len(finished_keys(results) & set(planned))
    return f"{done}/{len(planned)} trials finished" + (
        f" at time scale {spec.time_scale:g} (smoke verdicts)" if spec.time_scale < 1 else ""
    )


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _number(value: float | None, style: str) -> str:
    return "—" if value is None else style.format(value)


def _score(row: GroupStats) -> str:
    if row.mean_score is None:
        return "—"
    spread = "—" if row.score_stderr is None else f"{row.score_stderr:.2f}"
    return f"{row.mean_score:.2f} ± {spread}"


def _clear(row: GroupStats) -> str:
    if row.median_clear_s is None or row.p90_clear_s is None:
        return "—"
    return f"{row.median_clear_s:.1f}s/{row.p90_clear_s:.1f}s"


def format_progress(
    spec: CampaignSpec,
    results: Sequence[Result],
    *,
    running: int,
    queued: int,
    mean_wall_s: float | None,
    slots: int,
    stopping: bool = False,
) -> str:
    """`12/20 done, 5 running, 3 queued; passed reference 6/6, noop 0/6; ETA 2m10s`;
    once stopping, the queued trials are `left for a resume` and the ETA is the drain's."""
    planned = set(planned_trials(spec))
    standing = [r for r in _last(results) if r.key in planned]
    done = sum(r.verdict != "error" for r in standing)
    tally = []
    for agent in spec.agents:
        mine = [r for r in standing if r.agent == agent and r.verdict in COUNTED]
        tally.append(f"{agent} {sum(r.verdict == 'passed' for r in mine)}/{len(mine)}")
    eta = "ETA —"
    if mean_wall_s is not None:
        todo = running + (0 if stopping else queued)
        left = mean_wall_s * todo / max(1, min(slots, todo))
        eta = f"ETA {int(left // 60)}m{int(left % 60):02d}s"
    return (
        f"{done}/{len(planned)} done, {running} running, "
        f"{queued} {'left for a resume' if stopping else 'queued'}; "
        f"passed {', '.join(tally)}; {eta}"
    )
