"""Realistic run and campaign folders for the report tests, built from the contracts.

One run of `latency-cache-stampede` at time scale 0.1: the fault is armed at 0 s, the
alert fires at 20 s, the agent gets the page at 25 s, submits at 70 s, CI is green at
85 s, the fix is deployed at 95 s and the alert clears 15 s later; the grading window is
sampled every 3 s from the deploy, both vantage points, under a 25 rps storm.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sreforge_contracts import (
    AgentContext,
    AgentTranscript,
    BriefReady,
    CiOutcome,
    CiResult,
    CiTestSet,
    Deployed,
    DeployOutcome,
    EvalOnly,
    Event,
    FaultArmed,
    OracleScore,
    OracleSignal,
    PhaseTimings,
    RunContract,
    RunRecord,
    RunRequested,
    RunTriggered,
    RunWorkspace,
    ScenarioRef,
    Scored,
    SliSample,
    Submission,
    Submitted,
    Trajectory,
    Trigger,
    canonical_json,
)

from sreforge.campaign._show import summary
from sreforge.campaign._spec import parse_spec
from sreforge.campaign._store import Result

__all__ = ["SCENARIO", "T0", "write_campaign", "write_run"]

T0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)
SCENARIO = "latency-cache-stampede"
DIFF = """\
diff --git a/api/routes/books.py b/api/routes/books.py
--- a/api/routes/books.py
+++ b/api/routes/books.py
@@ -12,7 +12,7 @@ def search_books(query):
-    cache.delete_many(*cache_keys())  # invalidate on every search
+    # keep the cache: entries expire on their own (CACHE_DEFAULT_TIMEOUT)
     return _search(query)
"""


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _signals(passed: bool, clear_s: float) -> list[OracleSignal]:
    detail = f"cleared after {clear_s:.1f}s of 60.0s" if passed else "not cleared within 60.0s"
    return [
        OracleSignal(id="ci_green", satisfied=True, value=1, weight=0.25, detail="CI green"),
        OracleSignal(id="alert_cleared", satisfied=passed, value=float(passed), weight=0.35,
                     detail="BookshelfApiLatencyP99High inactive" if passed else "still firing"),
        OracleSignal(id="sustained_clear", satisfied=passed, value=float(passed), weight=0.2,
                     detail="36.0s clear" if passed else "never clear"),
        OracleSignal(id="time_to_clear", satisfied=passed, value=0.75 if passed else 0.0,
                     weight=0.1, detail=detail),
        OracleSignal(id="no_new_alerts", satisfied=True, value=1, weight=0.1, detail="none"),
    ]  # fmt: skip


def _series(passed: bool, clear_s: float) -> list[SliSample]:
    samples = []
    for i in range(36):
        offset = 3.0 * i
        fixed = passed and offset >= clear_s - 6
        firing = not (passed and offset >= clear_s)
        samples.append(SliSample(
            at=_at(95 + offset), offset_seconds=offset,
            sli=0.06 + 0.01 * (i % 3) if fixed else 0.9 + 0.05 * (i % 4),
            alert_state="firing" if firing else "inactive",
            firing_alerts=["BookshelfApiLatencyP99High"] if firing else [],
            load_achieved_rps=24.0 + (i % 5) * 0.3 if fixed else 17.0 + (i % 3),
            load_target_rps=25.0,
            client_p99_seconds=0.08 + 0.01 * (i % 2) if fixed else 1.1 + 0.04 * (i % 5),
        ))  # fmt: skip
    return samples


def _transcript(run_id: str, agent: str) -> AgentTranscript:
    def line(seconds: float, text: object) -> dict[str, object]:
        body = text if isinstance(text, str) else json.dumps(text)
        return {"t": _at(seconds).isoformat(), "stream": "stdout", "text": body}

    tool = {"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Checking the firing alerts in Alertmanager."},
        {"type": "tool_use", "name": "Bash",
         "input": {"command": "curl -s $ALERTMANAGER_URL/api/v2/alerts"}},
    ]}}  # fmt: skip
    result = {"type": "user", "message": {"content": [
        {"type": "tool_result",
         "content": '[{"labels":{"alertname":"BookshelfApiLatencyP99High"}}]'},
    ]}}  # fmt: skip
    rows = [
        {"call": n, "t": _at(30 + 10 * n).isoformat(), "model": "gpt-5-mini", "status": 200,
         "latency_s": 1.2 + n / 10, "tokens_in": 4000 + 500 * n, "tokens_out": 300,
         "cost_usd": 0.0016 + 0.0002 * n}
        for n in range(4)
    ]  # fmt: skip
    raw = {
        "format": "sreforge-stream.v1",
        "lines": [line(26, "reading the page"), line(31, tool), line(33, result),
                  line(60, "editing api/routes/books.py"), line(69, "submitting")],
        "model_calls": {"calls": 4, "tokens_in": 19000, "tokens_out": 1200, "cost_usd": 0.0076,
                        "models": ["gpt-5-mini"], "rows": rows},
    }  # fmt: skip
    return AgentTranscript(
        run_id=run_id, harness=agent, confinement="host-sandboxed", captured_at=_at(70),
        model="gpt-5-mini", provider="openai", submitted=True, raw_json=raw,
    )  # fmt: skip


def _contract(run_id: str) -> RunContract:
    return RunContract(
        agent_context=AgentContext(
            services={"prometheus": "http://127.0.0.1:19090"},
            run_workspace=RunWorkspace(path=f"/tmp/{run_id}/workspace", service="api"),
        ),
        scenario=ScenarioRef(id=SCENARIO, run_id=run_id,
                             expected_alert="BookshelfApiLatencyP99High", alert_fired_at=_at(20)),
        eval_only=EvalOnly(alert_to_clear="BookshelfApiLatencyP99High",
                           max_clear_time_seconds=60, sustained_clear_seconds=36),
    )  # fmt: skip


def _events(run_id: str, agent: str, score: OracleScore, verdict: str) -> list[Event]:
    trigger = Trigger(source="alertmanager", alert_name="BookshelfApiLatencyP99High",
                      severity="critical", fired_at=_at(20))  # fmt: skip
    p = "fixture"
    return [
        RunRequested(run_id=run_id, producer=p, scenario=SCENARIO, agent=agent, time_scale=0.1,
                     alert_route="r0ute", occurred_at=_at(-12)),
        FaultArmed(run_id=run_id, producer=p, armed_at=_at(0), delivery_mode="arm-deploy-recent",
                   load_target_rps=25, occurred_at=_at(0)),
        RunTriggered(run_id=run_id, producer=p, trigger=trigger, alert_fired_at=_at(20),
                     occurred_at=_at(21)),
        BriefReady(run_id=run_id, producer=p, page="# On call\n", contract=_contract(run_id),
                   occurred_at=_at(25)),
        Submitted(run_id=run_id, producer=p, occurred_at=_at(70), submission=Submission(
            agent_name=agent, diff=DIFF, submitted=True, duration_ms=45000)),
        CiResult(run_id=run_id, producer=p, green=True, output="5 passed", duration_ms=14000,
                 exit_code=0, occurred_at=_at(85)),
        Deployed(run_id=run_id, producer=p, redeployed=True, service="api", duration_ms=9000,
                 readiness="passed", occurred_at=_at(95)),
        Scored(run_id=run_id, producer=p, score=score, verdict=verdict,
               occurred_at=_at(203)),
    ]  # fmt: skip


def write_run(
    runs: Path, run_id: str, *, agent: str = "openai", passed: bool = True, clear_s: float = 15.0
) -> Path:
    """Write `runs/<run_id>/` as the recorder leaves it; return the folder."""
    signals = _signals(passed, clear_s)
    total = round(sum(s.value * s.weight for s in signals), 6)
    score = OracleScore(score=total, passed=passed and total >= 0.85, signals=signals)
    verdict = "passed" if score.passed else "failed"
    transcript = _transcript(run_id, agent)
    record = RunRecord(
        run_id=run_id, scenario_id=SCENARIO, profile="incident",
        trigger=Trigger(source="alertmanager", alert_name="BookshelfApiLatencyP99High",
                        severity="critical", fired_at=_at(20)),
        trajectory=Trajectory(agent_name=agent, diff=DIFF, submitted=True, duration_ms=45000),
        diff=DIFF,
        ci=CiOutcome(green=True, output="===== 5 passed in 3.1s =====", duration_ms=14000,
                     exit_code=0, test_sets=[
                         CiTestSet(name="submitted", green=True, exit_code=0, passed=5,
                                   duration_ms=3100),
                         CiTestSet(name="hidden", green=True, exit_code=0, passed=2,
                                   duration_ms=2100)]),
        deploy=DeployOutcome(redeployed=True, service="api", duration_ms=9000, readiness="passed"),
        score=score, verdict=verdict,
        timings=PhaseTimings(stack=8000, arm=2000, trigger=20000, context=1500, run=45000,
                             ci=14000, redeploy=9000, verify=108000, record=300, total=208000),
        started_at=T0, finished_at=_at(208), agent_transcript=transcript.header(),
        time_scale=0.1, sli_series=_series(passed, clear_s), topology="local",
    )  # fmt: skip
    folder = runs / run_id
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(record.canonical_json())
    (folder / "diff.patch").write_text(DIFF)
    (folder / "rca.txt").write_text(
        "Root cause: every search deletes the whole cache, so all requests miss and hit the "
        "database at once (p99 0.9s in Prometheus). Fix: stop invalidating on search.\n"
    )
    (folder / "agent-transcript.json").write_text(
        canonical_json(transcript.model_dump(mode="json"))
    )
    lines = [
        json.dumps({"seq": n, "subject": f"sreforge.run.{run_id}.x",
                    "event": event.model_dump(mode="json")})
        for n, event in enumerate(_events(run_id, agent, score, verdict), start=1)
    ]  # fmt: skip
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def write_campaign(
    campaigns: Path, runs: Path, campaign_id: str = "20261129-090000-c0ffee"
) -> Path:
    """A finished campaign of three agents x two scenarios x three trials, with run folders
    for the trials of `latency-cache-stampede`; return the campaign folder."""
    spec = parse_spec(
        f'scenarios = ["{SCENARIO}", "error-rate-bad-deploy"]\n'
        'agents = ["reference", "openai", "noop"]\ntrials = 3\ntime_scale = 0.1',
        "c.toml",
    )
    outcomes = {"reference": (True, True, True), "openai": (True, False, True),
                "noop": (False, False, False)}  # fmt: skip
    results: list[Result] = []
    for scenario in spec.scenarios:
        for agent, passes in outcomes.items():
            for trial, passed in enumerate(passes, start=1):
                if scenario != SCENARIO and agent == "openai":
                    passed = trial == 1
                run_id = f"20261129-08{trial:02d}{len(results):02d}-{agent[:3]}{trial:03d}"
                clear = 9.0 + 4 * trial + (6 if agent == "openai" else 0)
                if scenario == SCENARIO:
                    write_run(runs, run_id, agent=agent, passed=passed, clear_s=clear)
                cost = {"reference": None, "openai": 0.0076 + 0.001 * trial, "noop": None}[agent]
                results.append(Result(
                    agent=agent, scenario=scenario, trial=trial, run_id=run_id,
                    verdict="passed" if passed else "failed", score=0.94 if passed else 0.35,
                    time_to_clear_s=clear if passed else None, cost_usd=cost, wall_s=208.0,
                ))  # fmt: skip
    folder = campaigns / campaign_id
    folder.mkdir(parents=True)
    (folder / "campaign.toml").write_text(spec.to_toml())
    from dataclasses import asdict

    (folder / "results.jsonl").write_text("".join(json.dumps(asdict(r)) + "\n" for r in results))
    (folder / "summary.json").write_text(json.dumps(summary(campaign_id, spec, results), indent=2))
    return folder
