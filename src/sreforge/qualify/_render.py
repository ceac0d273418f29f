"""`verify/headroom.md`: the qualification's verdict and its evidence, as Markdown."""

from __future__ import annotations

from datetime import datetime

from sreforge.qualify._decide import HEADROOM_LIMIT, ArmEvidence, Decision

__all__ = ["render_headroom"]

_EXPECT = {"fail": "every trial fails", "pass": "every trial passes",
           "not-pass": "does not pass", "headroom": f"median score < {HEADROOM_LIMIT}"}  # fmt: skip


def _counts(row: ArmEvidence) -> str:
    return ", ".join(f"{verdict} {n}" for verdict, n in sorted(row.counts.items())) or "none"


def render_headroom(
    scenario: str, decision: Decision, campaign_id: str, when: datetime, time_scale: float
) -> str:
    """The file's text: verdict, evidence table, headroom, guard, campaign id, date, scale."""
    verdict = "QUALIFIED" if decision.qualified else "DISQUALIFIED"
    lines = [
        f"# {scenario}: {verdict}",
        "",
        f"Written by `sreforge qualify {scenario}` from campaign `{campaign_id}` on "
        f"{when.strftime('%Y-%m-%d %H:%M UTC')} at time scale {time_scale:g}"
        + (" (smoke verdicts)." if time_scale < 1 else "."),
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
            f"| {row.arm.kind} | `{row.arm.agent}` | {_EXPECT[row.arm.expect]} | {row.arm.trials}"
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
