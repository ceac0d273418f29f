"""One run's report page: verdict, SLI and load over time with the run's milestones, the
signals, CI, the diff, the RCA with its diagnosis, and the agent's timeline. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from html import escape

from sreforge_contracts import (
    BriefReady,
    CiResult,
    Deployed,
    FaultArmed,
    RunRecord,
    RunTriggered,
    SliSample,
    Submitted,
)

from sreforge_report._html import page, pill, section, table
from sreforge_report._load import RunBundle
from sreforge_report._svg import Band, Line, Marker, line_chart
from sreforge_report._timeline import timeline, usage_of

__all__ = ["milestones", "render_run"]

_MET, _UNMET = '<span class="ok">✔</span>', '<span class="bad">✘</span>'
_MARKER_COLORS = {
    "fault armed": "#8e44ad",
    "alert fired": "#c0392b",
    "hand-off": "#2471a3",
    "submitted": "#117a65",
    "CI": "#b9770e",
    "deployed": "#1e8449",
    "cleared": "#196f3d",
}


def render_run(bundle: RunBundle) -> str:
    """The whole page for one run folder."""
    record = bundle.record
    smoke = f" · smoke (time scale {record.time_scale})" if record.is_smoke else ""
    subtitle = (
        f"{record.scenario_id} · agent {record.trajectory.agent_name} · {record.verdict}"
        f" · score {record.score.score:.2f}{smoke}"
    )
    sections = [
        _overview(bundle),
        _charts(bundle),
        _signals(record),
        _ci(record),
        _diff(record.diff),
        _rca(bundle),
        _agent(bundle),
    ]
    return page(f"Run {record.run_id}", subtitle, sections)


def milestones(bundle: RunBundle) -> dict[str, datetime]:
    """When each milestone of the run happened (absent when it did not)."""
    found: dict[str, datetime] = {}
    for event in bundle.events:
        match event:
            case FaultArmed():
                found.setdefault("fault armed", event.armed_at)
            case RunTriggered():
                found.setdefault("alert fired", event.alert_fired_at)
            case BriefReady():
                found.setdefault("hand-off", event.occurred_at)
            case Submitted():
                found["submitted"] = event.occurred_at
            case CiResult():
                found.setdefault("CI", event.occurred_at)
            case Deployed():
                found.setdefault("deployed", event.occurred_at)
    record = bundle.record
    if "alert fired" not in found and record.trigger is not None:
        found["alert fired"] = record.trigger.fired_at
    cleared = _cleared(record, found.get("deployed"))
    if cleared is not None:
        found["cleared"] = cleared
    return found


def _cleared(record: RunRecord, deployed: datetime | None) -> datetime | None:
    from sreforge.campaign._outcome import time_to_clear

    seconds = time_to_clear(record.score)
    if seconds is not None and deployed is not None:
        return deployed + timedelta(seconds=seconds)
    after = [s for s in record.sli_series or () if deployed is None or s.at >= deployed]
    return next((s.at for s in after if s.alert_state == "inactive"), None)


def _overview(bundle: RunBundle) -> str:
    record = bundle.record
    timings = record.timings.model_dump(exclude_none=True)
    rows = [
        ["verdict", pill(record.verdict)],
        ["score", f"{record.score.score:.3f} ({'' if record.score.passed else 'not '}passed)"],
        ["scenario", escape(f"{record.scenario_id} ({record.profile})")],
        ["agent", escape(_agent_label(bundle))],
        ["started / finished", escape(f"{record.started_at:%Y-%m-%d %H:%M:%S} → "
                                      f"{record.finished_at:%H:%M:%S} UTC")],
        ["phases", escape(" · ".join(f"{k} {v / 1000:.1f}s" for k, v in timings.items()))],
    ]  # fmt: skip
    if record.abort_reason:
        rows.append(["abort reason", escape(record.abort_reason)])
    if record.trigger is not None:
        rows.append(["alert", escape(f"{record.trigger.alert_name} ({record.trigger.severity})")])
    rows.append(["folder", f"<code>{escape(str(bundle.folder))}</code>"])
    return section("Overview", table(["", ""], rows, css="overview"))


def _agent_label(bundle: RunBundle) -> str:
    header = bundle.record.agent_transcript
    label = bundle.record.trajectory.agent_name
    if header is not None:
        label += f" · {header.harness}"
        label += f" · model {header.model}" if header.model else ""
        label += f" · {header.confinement}"
    return label


def _charts(bundle: RunBundle) -> str:
    series = bundle.record.sli_series or []
    marks = milestones(bundle)
    if not series and not marks:
        return section("SLI over time", '<p class="muted">No SLI samples in this record.</p>')
    origin = marks.get("fault armed") or (series[0].at if series else bundle.record.started_at)

    def at(moment: datetime) -> float:
        return (moment - origin).total_seconds()

    markers = [Marker(at(t), name, _MARKER_COLORS[name]) for name, t in marks.items()]
    markers.sort(key=lambda m: m.x)
    x_label = "seconds since fault armed" if "fault armed" in marks else "seconds"
    sli = line_chart(
        [
            Line("app SLI", "#2471a3", [(at(s.at), s.sli) for s in series]),
            Line("load generator p99 (s)", "#d35400",
                 [(at(s.at), s.client_p99_seconds) for s in series], dashed=True),
        ],
        title="SLI from both vantage points, with the alert state",
        x_label=x_label, y_label="SLI", bands=_alert_bands(series, marks, at), markers=markers,
        y_min=0.0,
    )  # fmt: skip
    load = line_chart(
        [
            Line("achieved rps", "#117a65", [(at(s.at), s.load_achieved_rps) for s in series]),
            Line("target rps", "#7f8c8d", [(at(s.at), s.load_target_rps) for s in series],
                 dashed=True),
        ],
        title="Load: achieved vs target", x_label=x_label, y_label="requests/s",
        markers=[m for m in markers if m.label in {"deployed", "cleared"}], y_min=0.0,
    )  # fmt: skip
    note = (
        '<p class="muted">The grading window is sampled (the record\'s <code>sli_series</code>);'
        " before it, the alert is drawn firing from the moment it fired.</p>"
    )
    return section("SLI over time", sli + load + note)


def _alert_bands(
    series: list[SliSample], marks: dict[str, datetime], at: Callable[[datetime], float]
) -> list[Band]:
    colors = {"firing": "#e74c3c", "pending": "#f5b041"}
    bands: list[Band] = []
    fired = marks.get("alert fired")
    if fired is not None and series and series[0].at > fired:
        bands.append(Band(at(fired), at(series[0].at), colors["firing"], "alert firing"))
    for sample, following in zip(series, [*series[1:], None], strict=True):
        if sample.alert_state not in colors:
            continue
        end = following.at if following is not None else sample.at
        bands.append(
            Band(at(sample.at), at(end), colors[sample.alert_state], f"alert {sample.alert_state}")
        )
    return bands


def _signals(record: RunRecord) -> str:
    scores = [record.score, *record.score.sub_scores]
    parts = []
    for score in scores:
        rows = [
            [escape(s.id), _MET if s.satisfied else _UNMET,
             f"\x00num{s.value:.2f}", f"\x00num{s.weight:.2f}", escape(s.detail)]
            for s in score.signals
        ]  # fmt: skip
        caption = f"<p><b>{escape(score.oracle_id)}</b>: score {score.score:.3f}</p>"
        parts.append(caption + table(["signal", "met", "value", "weight", "detail"], rows,
                                     css="signals"))  # fmt: skip
    return section("Signals", "".join(parts))


def _ci(record: RunRecord) -> str:
    ci, deploy = record.ci, record.deploy
    if ci is None:
        body = '<p class="muted">CI did not run.</p>'
    else:
        rows = [
            [escape(t.name), "green" if t.green else "red", f"\x00num{t.passed}",
             f"\x00num{t.failed}", f"\x00num{t.errors}", f"\x00num{t.duration_ms / 1000:.1f}s"]
            for t in ci.test_sets or ()
        ]  # fmt: skip
        body = f"<p>CI {'green' if ci.green else 'red'} in {ci.duration_ms / 1000:.1f}s</p>"
        if rows:
            body += table(["test set", "result", "passed", "failed", "errors", "time"], rows)
        body += f"<details><summary>CI output</summary><pre>{escape(ci.output)}</pre></details>"
    if deploy is not None:
        body += (
            f"<p>Deploy of <code>{escape(deploy.service)}</code>: "
            f"{'redeployed' if deploy.redeployed else 'not redeployed'}, readiness "
            f"{escape(str(deploy.readiness))}, {deploy.duration_ms / 1000:.1f}s"
            f"{' · ' + escape(deploy.error) if deploy.error else ''}</p>"
        )
    return section("CI and deploy", body)


def _diff(diff: str) -> str:
    if not diff.strip():
        return section("Diff", '<p class="muted">The agent changed nothing.</p>')
    return section("Diff", f'<pre class="diff">{"".join(_diff_lines(diff))}</pre>')


def _diff_lines(diff: str) -> Iterable[str]:
    for line in diff.splitlines():
        css = ""
        if line.startswith("+") and not line.startswith("+++"):
            css = "add"
        elif line.startswith("-") and not line.startswith("---"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        text = escape(line)
        yield f'<span class="{css}">{text}</span>\n' if css else text + "\n"


def _rca(bundle: RunBundle) -> str:
    body = (
        f"<pre>{escape(bundle.rca)}</pre>"
        if bundle.rca
        else '<p class="muted">No RCA submitted.</p>'
    )
    diagnosis = bundle.diagnosis
    if diagnosis is not None:
        axes = diagnosis.axes
        body += (
            f"<p><b>Diagnosis</b> (judge {escape(diagnosis.judge_model)}, beside the verdict, "
            f"never in the score): {diagnosis.score:.2f} · root cause "
            f"{'correct' if axes.root_cause_correct else 'wrong'} · evidence "
            f"{'grounded' if axes.evidence_grounded else 'not grounded'} · "
            f"{'false lead' if axes.false_leads else 'no false lead'}</p>"
            f"<p>{escape(diagnosis.rationale)}</p>"
        )
    elif bundle.diagnosis_skipped:
        body += f'<p class="muted">Not judged: {escape(bundle.diagnosis_skipped)}</p>'
    return section("Root cause analysis", body)


def _agent(bundle: RunBundle) -> str:
    transcript = bundle.transcript
    if transcript is None:
        return section("Agent transcript", '<p class="muted">No agent transcript kept.</p>')
    raw = transcript.raw_json if transcript.raw_json is not None else transcript.raw_text
    usage = usage_of(transcript.raw_json)
    head = ""
    if usage is not None:
        cost = f"${usage.cost_usd:.4f}" if usage.cost_usd is not None else "not priced"
        head = (
            f"<p>{usage.calls} model calls · {usage.tokens_in} tokens in · {usage.tokens_out} "
            f"out · cost {cost} · {escape(', '.join(usage.models))}</p>"
        )
    start = bundle.record.started_at
    rows = [
        [f"\x00num{(e.at - start).total_seconds():.1f}s" if e.at else "",
         f'<span class="kind">{escape(e.kind)}</span>', f"<pre>{escape(e.text)}</pre>",
         f"\x00num{e.tokens}" if e.tokens else "",
         f"\x00num${e.cost_usd:.4f}" if e.cost_usd is not None else ""]
        for e in timeline(raw)
    ]  # fmt: skip
    body = head + table(["t", "step", "what", "tokens", "cost"], rows, css="timeline")
    return section("Agent transcript", body)
