"""Terminal views for people who live there: one run (`show`) and the recent runs (`runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sreforge_contracts import ContractError, RunRecord, SliSample, parse_run_record
from sreforge_report._load import RunBundle
from sreforge_report._run_page import milestones

__all__ = ["RunRow", "format_run", "format_runs", "list_runs", "sparkline"]

_BLOCKS = "▁▂▃▄▅▆▇█"
_ARTIFACTS = ("record.json", "events.jsonl", "diff.patch", "transcript.txt",
              "agent-transcript.json", "rca.txt", "diagnosis.json", "report.html")  # fmt: skip


@dataclass(frozen=True)
class RunRow:
    """One line of `sreforge runs`."""

    run_id: str
    scenario: str
    agent: str
    verdict: str
    score: float
    started: str
    total_s: float | None
    smoke: bool


def sparkline(values: Sequence[float | None], width: int = 60) -> str:
    """The values as block characters (a gap where a value is missing), at most `width`."""
    if len(values) > width:
        step = len(values) / width
        values = [values[int(i * step)] for i in range(width)]
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    return "".join(
        " " if v is None else _BLOCKS[min(int((v - low) / span * len(_BLOCKS)), len(_BLOCKS) - 1)]
        for v in values
    )


def format_run(bundle: RunBundle) -> str:
    """The verdict and signals, the phases with durations, the SLI sparkline, the files."""
    record = bundle.record
    smoke = f" (smoke, time scale {record.time_scale:g})" if record.is_smoke else ""
    lines = [
        f"run {record.run_id}: {record.scenario_id} by {record.trajectory.agent_name}",
        f"verdict: {record.verdict}{smoke}   score {record.score.score:.2f}",
    ]
    if record.abort_reason:
        lines.append(f"reason:  {record.abort_reason}")
    for signal in record.score.signals:
        mark = "✓" if signal.satisfied else "✗"
        lines.append(f"  {mark} {signal.id:<16} {signal.value:4.2f}  weight {signal.weight:.2f}"
                     f"  {signal.detail}")  # fmt: skip
    if bundle.diagnosis is not None:
        lines.append(f"diagnosis: {bundle.diagnosis.score:.2f} (beside the verdict, "
                     f"judge {bundle.diagnosis.judge_model})")  # fmt: skip
    elif bundle.diagnosis_skipped:
        lines.append(f"diagnosis: not judged ({bundle.diagnosis_skipped})")
    lines += ["", "phases:"]
    lines += _phases(record)
    marks = milestones(bundle)
    if marks:
        origin = min(marks.values())
        lines += ["", "milestones:"]
        lines += [f"  {name:<12} +{(at - origin).total_seconds():7.1f}s"
                  for name, at in sorted(marks.items(), key=lambda kv: kv[1])]  # fmt: skip
    series = record.sli_series or []
    if series:
        values = [s.sli for s in series]
        known = [v for v in values if v is not None]
        firing = "".join("!" if s.alert_state == "firing" else "·" for s in _spread(series))
        lines += ["", f"SLI ({len(series)} samples, {min(known, default=0):.3g} to "
                      f"{max(known, default=0):.3g}):", "  " + sparkline(values),
                  "  " + firing + "   (! alert firing)"]  # fmt: skip
    lines += ["", f"artifacts in {bundle.folder}:"]
    lines += [f"  {name}" for name in _ARTIFACTS if (bundle.folder / name).exists()]
    return "\n".join(lines)


def _spread(series: Sequence[SliSample], width: int = 60) -> Sequence[SliSample]:
    """The samples the sparkline draws (the same downsampling), for the alert-state line."""
    if len(series) <= width:
        return series
    step = len(series) / width
    return [series[int(i * step)] for i in range(width)]


def _phases(record: RunRecord) -> list[str]:
    timings = record.timings.model_dump(exclude_none=True)
    total = timings.pop("total", None) or sum(timings.values()) or 1.0
    rows = []
    for name, ms in timings.items():
        bar = "█" * max(1, round(ms / total * 30)) if ms else ""
        rows.append(f"  {name:<9} {ms / 1000:8.1f}s  {bar}")
    rows.append(f"  {'total':<9} {total / 1000:8.1f}s")
    return rows


def list_runs(
    root: Path, *, scenario: str | None = None, agent: str | None = None, verdict: str | None = None
) -> list[RunRow]:
    """The runs under `root` that have a record and match the filters, newest first."""
    rows = []
    for path in root.glob("*/record.json"):
        try:
            record = parse_run_record(path.read_bytes(), str(path))
        except (OSError, ContractError):
            continue
        row = _row(record)
        if (scenario in (None, row.scenario) and agent in (None, row.agent)
                and verdict in (None, row.verdict)):  # fmt: skip
            rows.append(row)
    return sorted(rows, key=lambda r: r.started, reverse=True)


def _row(record: RunRecord) -> RunRow:
    return RunRow(
        run_id=record.run_id,
        scenario=record.scenario_id,
        agent=record.trajectory.agent_name,
        verdict=record.verdict,
        score=record.score.score,
        started=record.started_at.strftime("%Y-%m-%d %H:%M:%S"),
        total_s=record.timings.total / 1000 if record.timings.total is not None else None,
        smoke=record.is_smoke,
    )


def format_runs(rows: Sequence[RunRow]) -> str:
    """A table of runs, or a line saying there are none."""
    if not rows:
        return "no runs with a record (runs/ or SREFORGE_RECORDER_RUNS_DIR)"
    header = (
        f"{'run':<24} {'started (UTC)':<19} {'scenario':<28} {'agent':<14} {'verdict':<9} "
        "score  time"
    )
    lines = [header]
    for r in rows:
        took = f"{r.total_s:.0f}s" if r.total_s is not None else "-"
        smoke = " smoke" if r.smoke else ""
        lines.append(f"{r.run_id:<24} {r.started:<19} {r.scenario[:28]:<28} {r.agent[:14]:<14} "
                     f"{r.verdict:<9} {r.score:5.2f}  {took}{smoke}")  # fmt: skip
    return "\n".join(lines)
