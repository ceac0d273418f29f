"""End to end over the multi-process topology: a run survives any one service dying.

Every service is its own `python -m sreforge serve <name>` process against one
external nats-server (SPEC §2, §11); `sreforge run` only submits and follows. The
matrix of issue 12 runs as one campaign (`wholerun._crash`): four runs side by side,
each on a topology of its own, each suffering a few faults staggered by phase (a
service's process group SIGKILLed and a fresh `serve` of it started at once, or the
nats-server down 5 s). Every case must end its run with exactly one schema-valid
record, the control verdict (the reference fix → passed), nothing of the run left,
and every service stopping cleanly. The slow-fix agent is the reference fix applied
after 25 s of work, so that the agent phase can be hit.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from wholerun import SCHEMA, assert_nothing_left
from wholerun._crash import SLOW_AGENT, Fault, Outcome, Plan, campaign

pytestmark = [
    pytest.mark.integration,
    # Green once on a quiet machine (14/14); with four runs side by side on 2 cores shared
    # with other work, `client_sli_held` still fails above load ~12 (docs/status.md).
    pytest.mark.skipif(
        os.environ.get("SREFORGE_CRASH_MATRIX") != "1",
        reason="the crash matrix runs with SREFORGE_CRASH_MATRIX=1 (not yet green as a whole)",
    ),
]

PLANS = (
    Plan(
        "alpha",
        SLOW_AGENT,
        (
            Fault("deployer", "boot"),
            Fault("correlator", "fired"),
            Fault("runner", "agent"),
            Fault("deployer", "ci"),
            Fault("recorder", "scored"),
        ),
    ),
    Plan(
        "bravo",
        "reference",
        (
            Fault("deployer", "arm"),
            Fault("context", "triggered"),
            Fault("deployer", "redeploy"),
            Fault("oracle", "grading"),
        ),
    ),
    Plan(
        "charlie",
        "reference",
        (
            Fault("trigger", "alerting"),
            Fault("runner", "triggered"),
            Fault("correlator", "deployed"),
        ),
    ),
    Plan("delta", SLOW_AGENT, (Fault("nats", "agent"), Fault("nats", "grading"))),
)
CASES = {fault.name: plan for plan in PLANS for fault in plan.faults}


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, Outcome]]:
    """The campaign, run once for the module: every plan at once, each on its own topology."""
    base = Path(tempfile.mkdtemp(prefix="runs-"))
    try:
        outcomes = campaign(base, PLANS)
        for outcome in outcomes.values():
            hits = ", ".join(f"{hit.fault.name} +{hit.back_s or 0:.1f} s" for hit in outcome.hits)
            wall = outcome.run.wall_s or 0.0
            print(f"\n{outcome.plan.name}: wall {wall:.1f} s; {hits}; {outcome.error or 'ok'}")
        yield outcomes
    finally:
        if not os.environ.get("SREFORGE_E2E_KEEP"):  # set it to look at the runs after
            shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", list(CASES))
def test_a_service_killed_at_its_phase_still_ends_with_one_passed_record(
    outcomes: dict[str, Outcome], case: str
) -> None:
    """The fault struck inside its phase, and its run still ended passed: one Scored, one
    Recorded, no RunFailed, one schema-valid record, nothing of the run left (no process,
    port, stack dir or CI clone), every service stopped cleanly."""
    outcome = outcomes[CASES[case].name]
    record = _passed_record(outcome)
    (hit,) = [hit for hit in outcome.hits if hit.fault.name == case]
    print(f"\n{case}: run wall {outcome.run.wall_s:.1f} s; phase ended {hit.back_s} s after")
    assert hit.landed, f"{case} struck after its phase had ended: nothing proved"
    target, phase = hit.fault.target, hit.fault.phase
    if target == "deployer" and phase in ("ci", "redeploy"):
        assert outcome.redeployed, "the resumed deployer did not redeploy the fix"
        assert '"deployer.stage_resumed"' in outcome.logs["deployer"]
    if (target, phase) == ("runner", "agent"):
        assert record["trajectory"]["restarts"] == 1, record["trajectory"]
        assert '"agent.restarted"' in outcome.logs["runner"]


def _passed_record(outcome: Outcome) -> dict[str, Any]:
    run = outcome.run
    assert outcome.error is None, f"{outcome.error}\n{run.progress}"
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one JSON outcome, got {run.stdout!r}\n{run.progress}"
    result = json.loads(lines[0])
    once = {"CiResult": 1, "Deployed": 1, "Scored": 1, "Recorded": 1, "CleanedUp": 1}
    assert outcome.counts == {**once, "RunFailed": 0}, f"{outcome.counts}\n{run.progress}"
    records = sorted(run.records_dir.glob("*/record.json"))
    assert len(records) == 1, f"expected one record, found {records}\n{run.progress}"
    assert result["record"] == str(records[0])
    record: dict[str, Any] = json.loads(records[0].read_text())
    jsonschema.validate(record, json.loads(SCHEMA.read_text()))
    assert record["run_id"] == result["run_id"]
    assert result["verdict"] == record["verdict"] == "passed", f"{result}\n{run.progress}"
    assert run.exit_code == 0
    assert_nothing_left(run, records[0].parent, set())
    clones = list(Path(tempfile.gettempdir()).glob(f"ci-{record['run_id']}-*"))
    assert not clones, f"CI clones of the run left: {clones}"
    assert all(code == 0 for code in outcome.stop_codes.values()), outcome.stop_codes
    assert not outcome.outlived, f"processes outlived their service: {outcome.outlived}"
    return record
