"""Campaign throughput: runs per hour, verdict agreement with serial runs, memory per run.

For each concurrency level (default 1, 3, 6, 10) runs one real `sreforge campaign` of the
reference and noop agents on one scenario (default latency-cache-stampede at time scale
0.1) with as many runs as the level, rounded up to even (half of them each), on
the embedded engine in a subprocess with its own engine home, records, stacks root and
campaigns folder. Level 1 runs one of each, one at a time: the serial verdicts the
other levels are compared with. While a level runs, a thread samples every 0.5 s the
summed RSS and PSS of each run's stack (its process groups, from the stack state files)
and the machine's used memory. RSS counts a page shared by several processes (the
interpreter, its libraries) once per process; PSS divides it among them, so the PSS of
a run's processes summed is what the run costs the machine. Prints one column per level:

- runs, wall time, runs/hour (runs x 3600 / wall);
- verdicts (`n:passed/runs r:passed/runs`), and agreement: the share of runs whose
  verdict is the serial one of its agent;
- the runs' median wall time (submit → record);
- peak stack RSS and PSS per run (the largest run's peak) and the machine's memory rise at the
  level's peak divided by its runs (engine, agents, CI and stacks together);
- the 1-minute load average's peak.

SPEC §11's targets: 10 at once with verdicts identical to serial, ≥ 200 quick runs/hour,
≤ 200 MB per run, a quick run ≤ 60 s alone.

    python bench/campaign.py [--levels 1,3,6,10] [--time-scale 0.1] [--scenario ID]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from sreforge_deployer.local import list_stacks

REPO = Path(__file__).resolve().parents[1]
AGENTS = ("reference", "noop")
MIB = 2**20


@dataclass
class Level:
    """What one concurrency level measured."""

    concurrency: int
    runs: int = 0
    wall_s: float = 0.0
    verdicts: dict[str, list[str]] = field(default_factory=dict)
    run_walls: list[float] = field(default_factory=list)
    peak_stack_rss: int = 0
    peak_stack_pss: int = 0
    peak_machine_rise: int = 0
    peak_load: float = 0.0
    exit_code: int | None = None


class Sampler:
    """Samples each run's stack RSS and the machine's used memory in a thread."""

    def __init__(self, stacks_root: Path, level: Level) -> None:
        self.stacks_root = stacks_root
        self.level = level
        self.baseline = psutil.virtual_memory().used
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            level = self.level
            level.peak_load = max(level.peak_load, os.getloadavg()[0])
            rise = psutil.virtual_memory().used - self.baseline
            level.peak_machine_rise = max(level.peak_machine_rise, rise)
            groups: dict[int, str] = {}
            try:
                for record in list_stacks(self.stacks_root):
                    groups.update({g.pgid: record.run_id for g in record.groups.values()})
            except OSError:
                continue  # a run dir going away under the scan
            rss: dict[str, int] = {}
            pss: dict[str, int] = {}
            for proc in psutil.process_iter(["pid"]):
                try:
                    run = groups.get(os.getpgid(proc.pid))
                    if run is not None:
                        memory = proc.memory_full_info()
                        rss[run] = rss.get(run, 0) + memory.rss
                        pss[run] = pss.get(run, 0) + memory.pss
                except (OSError, psutil.Error):
                    continue
            if rss:
                level.peak_stack_rss = max(level.peak_stack_rss, *rss.values())
                level.peak_stack_pss = max(level.peak_stack_pss, *pss.values())


def run_level(concurrency: int, scenario: str, time_scale: float, scratch: Path) -> Level:
    """One campaign of `concurrency` runs, `concurrency` at once."""
    level = Level(concurrency)
    root = scratch / f"c{concurrency}"
    root.mkdir()
    trials = max(1, (concurrency + 1) // 2)
    spec = root / "bench.toml"
    spec.write_text(
        f'scenarios = ["{scenario}"]\nagents = ["reference", "noop"]\ntrials = {trials}\n'
        f"time_scale = {time_scale}\nconcurrency = {concurrency}\n"
        "stack_memory_mb = 150\nreserve_memory_mb = 256\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SREFORGE_")}
    env.update(
        SREFORGE_HOME=str(root / "sreforge-home"),
        SREFORGE_CAMPAIGNS_DIR=str(root / "campaigns"),
        SREFORGE_RECORDER_RUNS_DIR=str(root / "records"),
        SREFORGE_RECORDER_BANK="false",
        SREFORGE_DEPLOYER_RUNS_ROOT=str(root / "stacks"),
        SREFORGE_CORRELATOR_AGENTS=",".join(AGENTS),
    )
    started = time.monotonic()
    with Sampler(root / "stacks", level), (root / "campaign.log").open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "sreforge", "campaign", str(spec)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    level.wall_s = time.monotonic() - started
    level.exit_code = done.returncode
    for results in (root / "campaigns").glob("*/results.jsonl"):
        for line in results.read_text().splitlines():
            result = json.loads(line)
            level.verdicts.setdefault(result["agent"], []).append(result["verdict"])
            if result.get("wall_s") is not None:
                level.run_walls.append(float(result["wall_s"]))
    level.runs = sum(len(v) for v in level.verdicts.values())
    return level


def agreement(level: Level, serial: dict[str, str]) -> float | None:
    """The share of the level's runs whose verdict is its agent's serial verdict."""
    pairs = [(a, v) for a, verdicts in level.verdicts.items() for v in verdicts]
    if not pairs:
        return None
    return sum(1 for agent, verdict in pairs if serial.get(agent) == verdict) / len(pairs)


def main() -> int:
    """Run every level and print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,3,6,10")
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--scenario", default="latency-cache-stampede")
    parser.add_argument("--keep", type=Path, help="keep every level's folder here")
    args = parser.parse_args()
    levels = sorted({int(text) for text in args.levels.split(",") if text.strip()} | {1})
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="bench-campaign-"))
    scratch.mkdir(parents=True, exist_ok=True)
    measured = []
    for concurrency in levels:
        level = run_level(concurrency, args.scenario, args.time_scale, scratch)
        print(f"level {concurrency}: {level.runs} runs in {level.wall_s:.0f} s, "
              f"exit {level.exit_code}", file=sys.stderr, flush=True)  # fmt: skip
        measured.append(level)
    serial = {agent: verdicts[0] for agent, verdicts in measured[0].verdicts.items() if verdicts}
    rows = {
        "runs": [str(m.runs) for m in measured],
        "wall (s)": [f"{m.wall_s:.0f}" for m in measured],
        "runs/hour": [f"{m.runs * 3600 / m.wall_s:.0f}" if m.wall_s else "-" for m in measured],
        "verdicts": [_verdicts(m) for m in measured],
        "agreement with serial": [_share(agreement(m, serial)) for m in measured],
        "median run wall (s)": [_median(m.run_walls) for m in measured],
        "peak stack RSS / run (MiB)": [f"{m.peak_stack_rss / MIB:.0f}" for m in measured],
        "peak stack PSS / run (MiB)": [f"{m.peak_stack_pss / MIB:.0f}" for m in measured],
        "machine memory rise / run (MiB)": [
            f"{m.peak_machine_rise / MIB / max(1, m.runs):.0f}" for m in measured
        ],
        "peak load (1 min)": [f"{m.peak_load:.1f}" for m in measured],
    }
    width = max(len(name) for name in rows)
    header = "".join(f"{'c=' + str(m.concurrency):>16}" for m in measured)
    print(f"{'':<{width}}{header}")
    for name, cells in rows.items():
        print(f"{name:<{width}}" + "".join(f"{cell:>16}" for cell in cells))
    print(f"(folders in {scratch})", file=sys.stderr)
    return 0


def _verdicts(level: Level) -> str:
    return " ".join(
        f"{agent[0]}:{sum(v == 'passed' for v in verdicts)}/{len(verdicts)}"
        for agent, verdicts in sorted(level.verdicts.items())
    )


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


if __name__ == "__main__":
    raise SystemExit(main())
