"""Shared sample data for the contracts tests: one valid instance of each big model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sreforge_contracts import (
    AgentTranscript,
    CiOutcome,
    DeployOutcome,
    OracleScore,
    OracleSignal,
    PhaseTimings,
    RunRecord,
    SliSample,
    Trajectory,
    Trigger,
    TriggerSignal,
)

T0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)
RUN_ID = "20261129-080000-abc123"

SEED_MANIFEST = '''
id         = "latency-cache-stampede"   # BINDING — unique id; matches the folder name
use_case   = "bookshelf"                # BINDING
stack      = "local"                    # BINDING
profile    = "incident"                 # ARCHETYPE
title      = "Cache stampede on book search under storm load"
family = "latency"
difficulty = "easy"
tags       = ["latency", "cache", "cache-stampede", "thundering-herd"]
description = """ A neutral paragraph. """

[expected]
alert                 = "BookshelfApiLatencyP99High"
severity              = "critical"
p99_threshold_seconds = 0.3
p99_promql = """
histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[30s])))
"""

[determinism]
confirm_fire_timeout_seconds = 240
sustained_clear_seconds      = 360
alert_fired_at               = ""

[inject]
mode       = "storm"
continuous = true
stop_during_verification = false

[verify]
oracle           = "mitigation"
qualification_mode = "score-headroom"
pass_threshold   = 0.85
load_active_during_scoring = true
signals = ["ci_green", "alert_cleared", "sustained_clear", "time_to_clear", "no_new_alerts"]
scope = ["api"]

[verify.weights]   # must sum to 1.0
ci_green        = 0.25
alert_cleared   = 0.35
sustained_clear = 0.20
time_to_clear   = 0.10
no_new_alerts   = 0.10

[endpoints]
prometheus   = "http://127.0.0.1:9090"
'''


@pytest.fixture
def trigger() -> Trigger:
    """The primary alert of a latency incident, with one correlated signal."""
    signal = TriggerSignal(
        alert_name="BookshelfApiLatencyP99High",
        severity="critical",
        labels={"service": "api", "alertname": "BookshelfApiLatencyP99High"},
        annotations={"summary": "p99 latency high"},
        fired_at=T0,
    )
    return Trigger(
        source="alertmanager",
        alert_name=signal.alert_name,
        severity="critical",
        labels=signal.labels,
        annotations=signal.annotations,
        fired_at=T0,
        fingerprint="0123abcd",
        signals=[signal],
    )


@pytest.fixture
def score() -> OracleScore:
    """A passing mitigation score."""
    return OracleScore(
        score=0.93,
        passed=True,
        signals=[
            OracleSignal(id="ci_green", satisfied=True, value=1, weight=0.25, detail="green"),
            OracleSignal(id="alert_cleared", satisfied=True, value=1, weight=0.35, detail="42s"),
        ],
    )


@pytest.fixture
def record(trigger: Trigger, score: OracleScore) -> RunRecord:
    """A complete passed record with every optional field set."""
    return RunRecord(
        run_id=RUN_ID,
        scenario_id="latency-cache-stampede",
        profile="incident",
        trigger=trigger,
        trajectory=Trajectory(
            agent_name="reference",
            diff="--- a\n+++ b\n",
            submitted=True,
            duration_ms=1200,
            transcript="runner log",
        ),
        diff="--- a\n+++ b\n",
        ci=CiOutcome(green=True, output="5 passed", duration_ms=900, exit_code=0),
        deploy=DeployOutcome(redeployed=True, service="api", duration_ms=300, readiness="passed"),
        score=score,
        verdict="passed",
        timings=PhaseTimings(run=1200, ci=900, redeploy=300, verify=36000),
        started_at=T0,
        finished_at=T0.replace(minute=5),
        agent_transcript=AgentTranscript(
            run_id=RUN_ID,
            harness="reference",
            confinement="host-open",
            captured_at=T0,
            raw_text="the agent said things",
        ),
        time_scale=0.1,
        sli_series=[
            SliSample(
                at=T0,
                offset_seconds=0.0,
                sli=0.12,
                alert_state="inactive",
                firing_alerts=[],
                load_achieved_rps=20.0,
                load_target_rps=20.0,
            )
        ],
        engine_version="0.1.0",
    )


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    """A scenario folder laid out like `use-cases/bookshelf/scenarios/<id>/`."""
    folder = tmp_path / "use-cases" / "bookshelf" / "scenarios" / "latency-cache-stampede"
    (folder / "environment").mkdir(parents=True)
    (folder / "scenario.toml").write_text(SEED_MANIFEST, encoding="utf-8")
    return folder
