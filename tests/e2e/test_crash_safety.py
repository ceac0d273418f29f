"""End to end over the multi-process topology: a run survives any one service dying.

Every service is its own `python -m sreforge serve <name>` process against one
external nats-server (SPEC §2, §11); `sreforge run` only submits and follows. The
matrix of issue 12 runs as four runs of the session's pool (`wholerun._crash`), each on
a topology of its own, each suffering a few faults staggered by phase (a service's
process group SIGKILLed and a fresh `serve` of it started at once, or the nats-server
down 5 s). Every case must end its run with exactly one schema-valid record, the
control verdict (the reference fix → passed), nothing of the run left, and every
service stopping cleanly. The slow-fix agent is the reference fix applied after 25 s of
work, so that the agent phase can be hit. A service whose phase is its own turn of one
event (milliseconds) is frozen (SIGSTOP) from an earlier phase until the strike, so the
strike lands inside it: the correlator from its run's alert firing, the context from
TriggerFired, the recorder from Deployed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from wholerun import SCHEMA, Run, RunPool, RunSpec, WholeRuns, assert_nothing_left, live_pids
from wholerun import open_pool as open_whole_runs
from wholerun._crash import SLOW_AGENT, Fault, Outcome, Plan, execute, slow_fix_script

pytestmark = pytest.mark.integration

PLANS = (
    Plan(
        "alpha",
        SLOW_AGENT,
        (
            Fault("deployer", "boot"),
            Fault("correlator", "fired", frozen_from="firing"),
            Fault("runner", "agent"),
            Fault("deployer", "ci"),
            Fault("recorder", "scored", frozen_from="deployed"),
        ),
    ),
    Plan(
        "bravo",
        "reference",
        (
            Fault("deployer", "arm"),
            # Frozen from the stack's readiness: the page → brief turn once outran a freeze
            # at "fired" (the context consumes nothing before RunTriggered).
            Fault("context", "triggered", frozen_from="arm"),
            Fault("deployer", "redeploy"),
            Fault("oracle", "grading"),
        ),
    ),
    Plan(
        "charlie",
        "reference",
        (
            Fault("trigger", "alerting"),
            # The context's page → brief turn takes milliseconds: held from the stack's
            # readiness until the runner is struck (a strike once came 0.09 s too late).
            Fault("runner", "triggered", frozen_from="arm", holding="context"),
            Fault("correlator", "deployed"),
        ),
    ),
    Plan("delta", SLOW_AGENT, (Fault("nats", "agent"), Fault("nats", "grading"))),
)
CASES = {fault.name: plan for plan in PLANS for fault in plan.faults}
OUTCOMES: dict[str, Outcome] = {}
"""Each plan's outcome, by plan name, once its run is over."""
TEST = "test_a_service_killed_at_its_phase_still_ends_with_one_passed_record"


def _plan_executor(plan: Plan) -> Callable[[Run], None]:
    def run_plan(run: Run) -> None:
        OUTCOMES[plan.name] = asyncio.run(execute(plan, run))

    return run_plan


def _slow_fix(run: Run) -> None:
    run.scripts_dir = slow_fix_script(run.root / "scripts")


RUNS = {
    plan.name: RunSpec(plan.agent, prepare=_slow_fix, execute=_plan_executor(plan))
    for plan in PLANS
}
TEST_RUNS = {f"{TEST}[{case}]": plan.name for case, plan in CASES.items()}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The plans' runs, started with the session's other whole runs."""
    with open_whole_runs(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", list(CASES))
def test_a_service_killed_at_its_phase_still_ends_with_one_passed_record(
    pool: RunPool, case: str
) -> None:
    """The fault struck inside its phase, and its run still ended passed: one Scored, one
    Recorded, no RunFailed, one schema-valid record, nothing of the run left (no process,
    port, stack dir or CI clone), every service stopped cleanly."""
    plan = CASES[case]
    pool.result(plan.name)
    outcome = OUTCOMES[plan.name]
    hits = ", ".join(f"{hit.fault.name} +{hit.back_s or 0:.1f} s" for hit in outcome.hits)
    print(f"\n{plan.name}: wall {outcome.run.wall_s or 0:.1f} s; {hits}; {outcome.error or 'ok'}")
    record = _passed_record(outcome)
    (hit,) = [hit for hit in outcome.hits if hit.fault.name == case]
    print(f"{case}: phase ended {hit.back_s} s after the strike")
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
    assert_nothing_left(run, records[0].parent, live_pids() - {run.pid})
    clones = list(Path(tempfile.gettempdir()).glob(f"ci-{record['run_id']}-*"))
    assert not clones, f"CI clones of the run left: {clones}"
    assert all(code == 0 for code in outcome.stop_codes.values()), outcome.stop_codes
    assert not outcome.outlived, f"processes outlived their service: {outcome.outlived}"
    return record
