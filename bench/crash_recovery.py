"""Crash recovery: the extra wall time one fault adds to a whole run (issue 12).

Each case of the crash matrix (a service SIGKILLed at its phase and restarted at once,
or the nats-server down 5 s) is one run of its own on a multi-process topology (the
machinery of `tests/e2e/test_crash_safety.py`, `tests/support/wholerun/_crash.py`).
Cases run `--parallel` at a time, and every wave also runs an undisturbed control run
of each agent its cases use, on the same machine under the same load; a case's extra
time is its wall time minus its wave's control's. Printed side by side, with the
verdict and whether the fault landed inside its phase (target: ≤ 5 s per single kill).

    python bench/crash_recovery.py [--parallel 3] [--only deployer@ci,runner@agent]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from wholerun._crash import SLOW_AGENT, Fault, Outcome, Plan, campaign

TARGET_EXTRA_S = 5.0
CASES = (
    (Fault("deployer", "boot"), "reference"),
    (Fault("deployer", "arm"), "reference"),
    (Fault("deployer", "ci"), "reference"),
    (Fault("deployer", "redeploy"), "reference"),
    (Fault("correlator", "fired"), "reference"),
    (Fault("correlator", "deployed"), "reference"),
    (Fault("runner", "agent"), SLOW_AGENT),
    (Fault("runner", "triggered"), "reference"),
    (Fault("recorder", "scored"), "reference"),
    (Fault("context", "triggered"), "reference"),
    (Fault("trigger", "alerting"), "reference"),
    (Fault("oracle", "grading"), "reference"),
    (Fault("nats", "agent"), SLOW_AGENT),
    (Fault("nats", "grading"), "reference"),
)


def _plan_name(fault: Fault) -> str:
    """A run name without harness words: letters only."""
    return "case" + "".join(ch for ch in fault.name.replace("@", "x") if ch.isalpha())


def _verdict(outcome: Outcome) -> str:
    lines = [line for line in outcome.run.stdout.splitlines() if line.strip()]
    if outcome.error or len(lines) != 1:
        return f"broken ({outcome.error or 'no outcome'})"
    return str(json.loads(lines[0]).get("verdict"))


def main() -> int:
    """Run the cases in waves, print each case's extra wall time against its control."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallel", type=int, default=3, help="cases per wave")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()
    wanted = {name for name in args.only.split(",") if name}
    cases = [(f, agent) for f, agent in CASES if not wanted or f.name in wanted]
    rows: list[tuple[str, float | None, float | None, str, bool, float | None]] = []
    for start in range(0, len(cases), args.parallel):
        wave = cases[start : start + args.parallel]
        controls = {agent: Plan(f"control{i}", agent, ()) for i, agent in
                    enumerate(sorted({agent for _, agent in wave}))}  # fmt: skip
        plans = (*controls.values(), *(Plan(_plan_name(f), agent, (f,)) for f, agent in wave))
        base = Path(tempfile.mkdtemp(prefix="runs-"))
        try:
            outcomes = campaign(base, plans)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        for fault, agent in wave:
            control = outcomes[controls[agent].name].run.wall_s
            outcome = outcomes[_plan_name(fault)]
            hit = outcome.hits[0] if outcome.hits else None
            landed = hit is not None and hit.landed
            back = hit.back_s if hit else None
            rows.append((fault.name, outcome.run.wall_s, control, _verdict(outcome), landed, back))
            print(f"done: {rows[-1]}", file=sys.stderr, flush=True)  # kept if a later wave hangs
    print(f"{'case':<22} {'wall s':>7} {'control s':>9} {'extra s':>8} {'phase end s':>11} "
          f"{'landed':<6} verdict")  # fmt: skip
    worst = 0.0
    for name, wall, control, verdict, landed, back in rows:
        extra = None if wall is None or control is None else wall - control
        worst = max(worst, extra or 0.0)
        shown = [f"{v:.1f}" if v is not None else "-" for v in (wall, control, extra, back)]
        print(f"{name:<22} {shown[0]:>7} {shown[1]:>9} {shown[2]:>8} {shown[3]:>11} "
              f"{landed!s:<6} {verdict}")  # fmt: skip
    met = "met" if worst <= TARGET_EXTRA_S else "NOT met"
    print(f"worst extra {worst:.1f} s (target ≤ {TARGET_EXTRA_S:.0f} s per single kill: {met})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
