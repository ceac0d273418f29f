"""The local and the compose topology side by side: boot, arm, redeploy, teardown, a run.

Boots the real latency-cache-stampede stack at `--time-scale` (default 0.1) on each
topology in turn, arms it, redeploys the service behind the readiness gate and tears it
down, timing each step; with `--runs`, also times a whole `sreforge run … --agent
reference` on each (the CLI in a subprocess with its own engine home, records and
stacks root; one run at a time). Prints the medians over `--repeat` rounds, one column
per topology. The compose stack image is built before the first round (its one-off cost
is printed apart).

    python bench/topology_compare.py [--time-scale 0.1] [--repeat 1] [--runs]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_stack import ComposeStack
from sreforge_deployer.local import LocalStack

REPO = Path(__file__).resolve().parents[1]
SCENARIO_ID = "latency-cache-stampede"
SCENARIO = REPO / "use-cases/bookshelf/scenarios" / SCENARIO_ID
TOPOLOGIES = ("local", "compose")
STEPS = ("up", "arm", "redeploy", "down")


def _timed(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def stack_round(topology: str, time_scale: float, runs_root: Path) -> dict[str, float]:
    """One stack's up, arm, redeploy and down, in seconds."""
    settings = DeployerSettings(runs_root=runs_root)
    steps: tuple[Callable[[], object], ...]
    if topology == "local":
        local = LocalStack(SCENARIO, time_scale=time_scale, settings=settings)
        steps = (local.up, local.arm, local.redeploy, local.down)
    else:
        compose = ComposeStack(SCENARIO, time_scale=time_scale, settings=settings)
        steps = (compose.up, compose.arm, compose.redeploy, compose.down)
    timings: dict[str, float] = {}
    try:
        for index, name in enumerate(STEPS):
            timings[name] = _timed(steps[index])
    finally:
        if "down" not in timings:
            steps[-1]()
    return timings


def whole_run(topology: str, time_scale: float) -> float:
    """Wall seconds of `sreforge run … --agent reference --topology <topology>`."""
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        root = Path(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SREFORGE_")}
        env.update(
            SREFORGE_HOME=str(root / "home"),
            SREFORGE_RECORDER_RUNS_DIR=str(root / "records"),
            SREFORGE_RECORDER_BANK="false",
            SREFORGE_DEPLOYER_RUNS_ROOT=str(root / "stacks"),
            SREFORGE_CORRELATOR_AGENTS="reference",
        )
        argv = [sys.executable, "-m", "sreforge", "run", SCENARIO_ID, "--agent", "reference"]
        argv += ["--time-scale", str(time_scale), "--topology", topology, "--json"]
        started = time.monotonic()
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
    if done.returncode != 0:
        print(f"{topology} run exited {done.returncode}: {done.stdout[-300:]}", file=sys.stderr)
    return wall


def main() -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--runs", action="store_true", help="also time a whole reference run")
    args = parser.parse_args()
    image = ComposeStack(SCENARIO).stack_image()
    print(f"compose stack image ready in {_timed(image.ensure):.1f} s", flush=True)
    samples: dict[str, dict[str, list[float]]] = {t: {} for t in TOPOLOGIES}
    with tempfile.TemporaryDirectory(prefix="stacks-") as runs_root:
        for round_number in range(1, args.repeat + 1):
            for topology in TOPOLOGIES:
                timings = stack_round(topology, args.time_scale, Path(runs_root))
                if args.runs:
                    timings["whole run"] = whole_run(topology, args.time_scale)
                for step, seconds in timings.items():
                    samples[topology].setdefault(step, []).append(seconds)
                shown = ", ".join(f"{step} {s:.1f}" for step, s in timings.items())
                print(f"round {round_number} {topology}: {shown}", flush=True)
    print(f"\nmedian seconds over {args.repeat} round(s), time scale {args.time_scale:g}")
    print(f"{'step':<10} {'local':>8} {'compose':>8}")
    for step in samples["local"]:
        local = statistics.median(samples["local"][step])
        compose = statistics.median(samples["compose"][step])
        print(f"{step:<10} {local:>8.1f} {compose:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
