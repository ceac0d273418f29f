"""CPU a whole run costs in each phase: the figures campaign admission budgets the cores by.

Runs `sreforge run <scenario> --agent reference` (default latency-cache-stampede at time
scale 0.1) on the embedded engine in a subprocess with its own engine home and records,
follows its phase lines (stderr) and, every 0.25 s, reads two CPU figures: the CPU time
of the command's whole process tree (engine, services, stacks, CI; per process, its
largest reading, so a process that ends between two readings loses at most 0.25 s) and
the machine's busy CPU time (`/proc/stat` minus idle and iowait: it also sees what ends
between readings, and whatever else the machine does). Each reading's increase goes to
the phase the run was in (`sreforge._admission.phase_of` the last phase line; the
embedded engine's start-up before the first one is a row of its own). Prints,
per admission phase: its wall time, CPU seconds of the tree and of the machine, and the
cores it used (CPU / wall); run it on a quiet machine.

    python bench/run_cpu.py [--scenario ID] [--time-scale 0.1] [--agent reference]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sreforge._admission import PHASES, phase_of

_EVERY_S = 0.25
_ENGINE_START = "engine"  # the embedded engine's start-up, before the run's first phase


@dataclass
class PhaseFigures:
    """What one phase of one run measured."""

    wall_s: float = 0.0
    tree_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0


@dataclass
class Meter:
    """Attributes CPU time to the phase the run is in, read in a thread."""

    root: psutil.Process
    phase: str = _ENGINE_START
    figures: dict[str, PhaseFigures] = field(default_factory=dict)
    _seen: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Read until `stop`; each reading's increase goes to the current phase."""
        last_tree, last_machine, last_t = self._tree(), _machine_busy(), time.monotonic()
        while not self._stop.wait(_EVERY_S):
            tree, machine, now = self._tree(), _machine_busy(), time.monotonic()
            into = self.figures.setdefault(self.phase, PhaseFigures())
            into.wall_s += now - last_t
            into.tree_cpu_s += tree - last_tree
            into.machine_cpu_s += machine - last_machine
            last_tree, last_machine, last_t = tree, machine, now

    def stop(self) -> None:
        """End the readings."""
        self._stop.set()

    def _tree(self) -> float:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            procs = []
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            spent = times.user + times.system
            self._seen[proc.pid] = max(self._seen.get(proc.pid, 0.0), spent)
        return sum(self._seen.values())


def _machine_busy() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def main() -> int:
    """Run once and print the per-phase CPU table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="latency-cache-stampede")
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--agent", default="reference")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="run-cpu-") as scratch:
        root = Path(scratch)
        env = {k: v for k, v in os.environ.items() if k != "SREFORGE_NATS_URL"}
        env.update(
            SREFORGE_HOME=str(root / "home"),
            SREFORGE_RECORDER_RUNS_DIR=str(root / "runs"),
            SREFORGE_RECORDER_BANK="false",
            SREFORGE_DEPLOYER_RUNS_ROOT=str(root / "stacks"),
        )
        command = [sys.executable, "-m", "sreforge", "run", args.scenario,
                   "--agent", args.agent, "--time-scale", str(args.time_scale)]  # fmt: skip
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        meter = Meter(psutil.Process(child.pid))
        reader = threading.Thread(target=meter.run, daemon=True)
        reader.start()
        assert child.stderr is not None
        for line in child.stderr:
            sys.stderr.write(line)
            words = line.split()
            if len(words) >= 2 and words[0].endswith("s"):
                shown = " ".join(words[1:3]) if words[1] in ("stack", "cleaned") else words[1]
                meter.phase = phase_of(shown)
        child.wait()
        meter.stop()
        reader.join()
    wall = time.monotonic() - started
    print(f"{args.agent} on {args.scenario} at time scale {args.time_scale}: "
          f"exit {child.returncode}, {wall:.1f} s, {psutil.cpu_count()} cores")  # fmt: skip
    print(f"{'phase':<10}{'wall s':>9}{'tree CPU s':>12}{'machine CPU s':>15}{'cores':>8}")
    for phase in (_ENGINE_START, *PHASES):
        got = meter.figures.get(phase, PhaseFigures())
        cores = got.tree_cpu_s / got.wall_s if got.wall_s else 0.0
        print(f"{phase:<10}{got.wall_s:>9.1f}{got.tree_cpu_s:>12.1f}"
              f"{got.machine_cpu_s:>15.1f}{cores:>8.2f}")  # fmt: skip
    return child.returncode


if __name__ == "__main__":
    raise SystemExit(main())
