"""`verify/headroom.md`: the qualification's verdict and its evidence, as Markdown."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from sreforge.qualify._decide import HEADROOM_LIMIT, ArmEvidence, Decision

__all__ = ["qualification_of", "render_headroom"]

_EXPECT = {"fail": "every trial fails", "pass": "every trial passes",
           "not-pass": "does not pass", "headroom": f"median score < {HEADROOM_LIMIT}"}  # fmt: skip


def _counts(row: ArmEvidence) -> str:
    return ", ".join(f"{verdict} {n}" for verdict, n in sorted(row.counts.items())) or "none"


def render_headroom(
    scenario: str,
    decision: Decision,
    campaign_id: str,
    when: datetime,
    time_scale: float,
    full_scale_campaign: str | None = None,
) -> str:
    """The file's text: verdict, evidence table, headroom, guard, campaign ids, date, scale."""
    verdict = "QUALIFIED" if decision.qualified else "DISQUALIFIED"
    full = (
        f"; the time-scale-1 arms from campaign `{full_scale_campaign}`"
        if full_scale_campaign
        else ""
    )
    lines = [
        f"# {scenario}: {verdict}",
        "",
        f"Written by `sreforge qualify {scenario}` from campaign `{campaign_id}` on "
        f"{when.strftime('%Y-%m-%d %H:%M UTC')} at time scale {time_scale:g}"
        + (" (smoke verdicts)" if time_scale < 1 else "")
        + f"{full}.",
        "",
    ]
    if decision.reasons:
        lines += ["## Why not qualified", ""] + [f"- {r}" for r in decision.reasons] + [""]
    lines += [
        "## Evidence",
        "",
        "| arm | agent | expected | N | outcomes | held | run ids |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in decision.rows:
        if row.arm.kind == "baseline":
            continue
        lines.append(
            f"| {row.arm.label} | `{row.arm.agent}` | {_EXPECT[row.arm.expect]} | {row.arm.trials}"
            f" | {_counts(row)} | {'yes' if row.held else 'NO'}: {row.why}"
            f" | {' '.join(row.run_ids) or '—'} |"
        )
    lines += ["", f"`sreforge guard`: {decision.guard.detail}", "", "## Headroom", ""]
    baselines = [row for row in decision.rows if row.arm.kind == "baseline"]
    if not baselines:
        lines.append("Not measured: no baseline agent was given (`--baseline AGENT`).")
    else:
        lines += ["| agent | N | outcomes | median score | held | run ids |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for row in baselines:
            median = "—" if row.median_score is None else f"{row.median_score:.2f}"
            lines.append(
                f"| `{row.arm.agent}` | {row.arm.trials} | {_counts(row)} | {median}"
                f" | {'yes' if row.held else 'NO'}: {row.why} | {' '.join(row.run_ids) or '—'} |"
            )
    return "\n".join(lines) + "\n"


_VERDICT_LINE = re.compile(r"^# \S+: (QUALIFIED|DISQUALIFIED)$")


def qualification_of(headroom: Path) -> str:
    """What a scenario's `verify/headroom.md` says: QUALIFIED or DISQUALIFIED (its first
    line, as `render_headroom` writes it), or `not qualified` without one."""
    try:
        first = headroom.read_text(encoding="utf-8").splitlines()[:1]
    except (OSError, UnicodeDecodeError):
        return "not qualified"
    found = _VERDICT_LINE.match(first[0]) if first else None
    return found.group(1) if found else "not qualified"
