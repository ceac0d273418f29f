"""Crash recovery: the extra wall time one fault adds to a whole run (issue 12).

Each case of the crash matrix (a service SIGKILLed at its phase and restarted at once,
or the nats-server down 5 s; the faults of `tests/e2e/test_crash_safety.py`) is one run
of its own on a multi-process topology (`tests/support/wholerun/_crash.py`). Cases run
`--parallel` at a time; every wave also runs one undisturbed control run of each agent
its cases use, and control-only waves follow until every agent has `--controls` of
them. A case's extra time is its wall minus the median of its agent's controls (so one
noisy control does not decide it). Beside it, figures that need no control, read from
the case's own run (`wholerun._recovery`): the restarted service's start-up, when the
in-flight work came back (its first redelivery, else the run's next event), and when the
event ending the phase came, and how long the firing alert took to reach the engine
(*alert s*: TriggerFired's `occurred_at - trigger.fired_at`, beside the controls' median; the
trigger's own figure, since its next event also waits on the alert). Each wave's rows are
printed as it ends (extra against the controls so far), the final table at the end
(target: ≤ 5 s per single kill).

    python bench/crash_recovery.py [--parallel 2] [--controls 3] [--only deployer@ci,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from wholerun._crash import NATS_DOWN_S, SLOW_AGENT, Fault, Outcome, Plan, campaign
from wholerun._recovery import Recovery, median, recovery

TARGET_EXTRA_S = 5.0
CASES = (  # the test's faults, the slow agent's cases in one wave
    (Fault("runner", "agent"), SLOW_AGENT),
    (Fault("nats", "agent"), SLOW_AGENT),
    (Fault("deployer", "boot"), "reference"),
    (Fault("deployer", "arm"), "reference"),
    (Fault("deployer", "ci"), "reference"),
    (Fault("deployer", "redeploy"), "reference"),
    (Fault("correlator", "fired", frozen_from="firing"), "reference"),
    (Fault("correlator", "deployed"), "reference"),
    (Fault("runner", "triggered"), "reference"),
    (Fault("recorder", "scored", frozen_from="deployed"), "reference"),
    (Fault("context", "triggered", frozen_from="fired"), "reference"),
    (Fault("trigger", "alerting"), "reference"),
    (Fault("oracle", "grading"), "reference"),
    (Fault("nats", "grading"), "reference"),
)
HEADER = (
    f"{'case':<20} {'wall s':>6} {'ctl med s':>9} {'n':>2} {'extra s':>7} {'start s':>7} "
    f"{'resumed s':>9} {'phase end s':>11} {'alert s':>7} {'ctl alert s':>11} {'landed':<6} verdict"
)


@dataclass
class Row:
    """One case's run and its figures."""

    name: str
    agent: str
    wall: float | None
    verdict: str
    landed: bool
    back: float | None
    recovered: Recovery | None
    alert: float | None


def _plan_name(fault: Fault) -> str:
    """A run name without harness words: letters only."""
    return "case" + "".join(ch for ch in fault.name.replace("@", "x") if ch.isalpha())


def _verdict(outcome: Outcome) -> str:
    lines = [line for line in outcome.run.stdout.splitlines() if line.strip()]
    if outcome.error or len(lines) != 1:
        return f"broken ({outcome.error or 'no outcome'})"
    return str(json.loads(lines[0]).get("verdict"))


def _row(fault: Fault, agent: str, outcome: Outcome) -> Row:
    hit = outcome.hits[0] if outcome.hits else None
    found = None
    if hit is not None:
        found = recovery(fault.target, hit.at, outcome.logs, outcome.events, NATS_DOWN_S)
    return Row(
        fault.name,
        agent,
        outcome.run.wall_s,
        _verdict(outcome),
        hit is not None and hit.landed,
        hit.back_s if hit else None,
        found,
        outcome.alert_delay_s,
    )


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _line(row: Row, controls: dict[str, list[float]], alerts: list[float]) -> str:
    walls = controls.get(row.agent, [])
    control = median(walls)
    extra = None if row.wall is None or control is None else row.wall - control
    found = row.recovered
    start, resumed = (found.started_s, found.resumed_s) if found else (None, None)
    return (
        f"{row.name:<20} {_shown(row.wall):>6} {_shown(control):>9} {len(walls):>2} "
        f"{_shown(extra):>7} {_shown(start):>7} {_shown(resumed):>9} {_shown(row.back):>11} "
        f"{_shown(row.alert):>7} {_shown(median(alerts)):>11} {row.landed!s:<6} {row.verdict}"
    )


def _waves(cases: list[tuple[Fault, str]], parallel: int, least: int) -> list[list[Plan]]:
    """Waves of `parallel` cases each beside a control per agent, then control-only
    waves until every agent has `least` controls."""
    waves: list[list[Plan]] = []
    count: dict[str, int] = {}
    for start in range(0, len(cases), parallel):
        wave = cases[start : start + parallel]
        plans = [Plan(_plan_name(f), agent, (f,)) for f, agent in wave]
        for agent in sorted({agent for _, agent in wave}):
            plans.append(Plan(f"control{sum(count.values())}", agent, ()))
            count[agent] = count.get(agent, 0) + 1
        waves.append(plans)
    missing = [agent for agent in sorted(count) for _ in range(least - count[agent])]
    for start in range(0, len(missing), parallel):
        chunk = enumerate(missing[start : start + parallel], sum(count.values()) + start)
        waves.append([Plan(f"control{number}", agent, ()) for number, agent in chunk])
    return waves


def main() -> int:
    """Run the waves, print each wave's rows as it ends and the final table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallel", type=int, default=2, help="cases per wave")
    parser.add_argument("--controls", type=int, default=3, help="least controls per agent")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()
    wanted = {name for name in args.only.split(",") if name}
    cases = [(f, agent) for f, agent in CASES if not wanted or f.name in wanted]
    by_plan = {_plan_name(f): (f, agent) for f, agent in cases}
    rows: list[Row] = []
    controls: dict[str, list[float]] = {}
    alerts: list[float] = []  # the controls' alert delays, every agent
    for number, plans in enumerate(_waves(cases, args.parallel, args.controls), 1):
        base = Path(tempfile.mkdtemp(prefix="runs-"))
        try:
            outcomes = campaign(base, tuple(plans))
        finally:
            shutil.rmtree(base, ignore_errors=True)
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
        walls, done = [], []
        for plan in plans:
            outcome = outcomes[plan.name]
            if not plan.faults:
                walls.append(f"{plan.agent} {_shown(outcome.run.wall_s)}")
                if outcome.run.wall_s is not None and _verdict(outcome) == "passed":
                    controls.setdefault(plan.agent, []).append(outcome.run.wall_s)
                if outcome.alert_delay_s is not None:
                    alerts.append(outcome.alert_delay_s)
            else:
                done.append(_row(*by_plan[plan.name], outcome))
        rows += done
        print(f"wave {number}: controls {', '.join(walls)}; load {load}", flush=True)
        print(f"  {HEADER}" if done else "  (controls only)", flush=True)
        for row in done:
            print(f"  {_line(row, controls, alerts)}", flush=True)
    print("\nfinal (extra against the median of all the agent's controls)")
    for agent, times in sorted(controls.items()):
        print(f"controls {agent}: {', '.join(f'{w:.1f}' for w in times)}")
    print(HEADER)
    for row in rows:
        print(_line(row, controls, alerts))
    medians = {agent: median(times) for agent, times in controls.items()}
    extras = {row.name: row.wall - m for row in rows
              if row.wall is not None and (m := medians.get(row.agent)) is not None}  # fmt: skip
    over = sorted(name for name, extra in extras.items() if extra > TARGET_EXTRA_S)
    worst = max(extras.values(), default=0.0)
    met = "met" if not over else f"NOT met by {', '.join(over)}"
    print(f"worst extra {worst:.1f} s (target ≤ {TARGET_EXTRA_S:.0f} s per single kill: {met})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
