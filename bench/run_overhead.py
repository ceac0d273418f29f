"""Engine overhead of a whole run: wall time against the run's inherent phases.

Runs `sreforge run <scenario> --agent reference` (default latency-cache-stampede at time
scale 0.1) as an operator would, on the embedded engine, then reads the run's record and
event log and prints, side by side:

- the wall time of the command, and the inherent time (stack boot + arming and the
  confirm-fire wait + agent + CI + redeploy + grading, from the record's phase timings);
  their ratio is the engine's overhead (target ≤ 1.02, SPEC §11);
- the hop from the page reaching the engine (the trigger service's TriggerFired) to the
  run being triggered (RunTriggered), and from Prometheus starting to fire to the webhook arriving
  (Alertmanager's group wait, scaled, dominates that one).

It also prints the CPU the run cost: the command's process tree (its own and every
descendant's it reaped: the engine, the stack, CI; `getrusage(RUSAGE_CHILDREN)`) and the
machine's busy time meanwhile (`/proc/stat`, everything else the machine did included):
in a packed campaign or CI, CPU per run rather than wall time sets the pace.

It also prints where the wall time outside the phases went (start-up before
RunRequested, the context phase, record, teardown, exit); `--keep DIR` copies each
run's record and event log to DIR for a closer look. With `--engine-up` the command
joins an engine started beforehand (`sreforge up`), so the engine's own start-up and
shutdown fall outside the run, as for every run but the first on a running engine.

    python bench/run_overhead.py [--scenario ID] [--time-scale 0.1] [--repeat 1]
                                 [--keep DIR] [--engine-up]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

INHERENT_PHASES = ("stack", "arm", "trigger", "run", "ci", "redeploy", "verify")


def main() -> int:
    """Run the reference agent `--repeat` times and print the overhead figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="latency-cache-stampede")
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="copy each run's record and events here")
    parser.add_argument(
        "--engine-up",
        action="store_true",
        help="join a running `sreforge up` instead of the embedded engine",
    )
    args = parser.parse_args()
    ratios = []
    cache = Path(tempfile.mkdtemp(prefix="run-cache-"))
    for number in range(1, args.repeat + 1):
        figures = measure(
            args.scenario, args.time_scale, args.keep, engine_up=args.engine_up, cache=cache
        )
        ratios.append(figures.wall_s / figures.inherent_s)
        print(
            f"run {number}: verdict {figures.verdict}  wall {figures.wall_s:.1f} s  "
            f"inherent {figures.inherent_s:.1f} s  ratio {ratios[-1]:.3f} (target ≤ 1.02)\n"
            f"  phases (s): {figures.phases}\n"
            f"  webhook received → run triggered: {figures.hop_ms:.1f} ms;  "
            f"alert firing → webhook received: {figures.page_s:.2f} s\n"
            f"  outside the phases (s): {figures.outside}\n"
            f"  CPU: process tree {figures.tree_cpu_s:.1f} s, machine busy "
            f"{figures.machine_cpu_s:.1f} s ({figures.machine_cpu_s / figures.wall_s:.2f} "
            f"cores over the wall time)"
        )
    shutil.rmtree(cache, ignore_errors=True)
    if args.repeat > 1:
        print(f"ratio median {statistics.median(ratios):.3f} over {args.repeat} runs")
    return 0


@dataclass(frozen=True)
class RunFigures:
    """What one measured run gives."""

    verdict: str
    wall_s: float
    inherent_s: float
    phases: dict[str, float]
    hop_ms: float
    page_s: float
    outside: dict[str, float]
    tree_cpu_s: float
    machine_cpu_s: float


def measure(
    scenario: str,
    time_scale: float,
    keep: Path | None = None,
    *,
    engine_up: bool = False,
    cache: Path | None = None,
) -> RunFigures:
    """One reference run; the figures read back from its record and event log.

    `engine_up`: the command joins an engine already running (`sreforge up`), so the
    engine's own start and stop are not part of the run's wall time. `cache`: the
    deployer cache the repeats share, as the runs of one engine home do (the first run
    seeds and learns the CI base, the later ones reuse them).
    """
    with tempfile.TemporaryDirectory(prefix="run-overhead-") as scratch:
        root = Path(scratch)
        env = {
            **os.environ,
            "SREFORGE_HOME": str(root / "home"),
            "SREFORGE_RECORDER_RUNS_DIR": str(root / "runs"),
            "SREFORGE_RECORDER_BANK": "false",
        }
        if cache is not None:
            env["SREFORGE_DEPLOYER_CACHE_DIR"] = str(cache)
        env.pop("SREFORGE_NATS_URL", None)
        command = [sys.executable, "-m", "sreforge", "run", scenario, "--agent", "reference"]
        command += ["--time-scale", str(time_scale), "--json"]
        with _running_engine(env, root / "home") if engine_up else contextlib.nullcontext():
            tree_before, machine_before = _tree_cpu_s(), _machine_busy_s()
            started, started_at = time.monotonic(), datetime.now(UTC)
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            wall_s = time.monotonic() - started
            tree_cpu_s = _tree_cpu_s() - tree_before
            machine_cpu_s = _machine_busy_s() - machine_before
            ended_at = datetime.now(UTC)
        if done.returncode != 0:
            sys.exit(f"run failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        run_dir = root / "runs" / outcome["run_id"]
        record = json.loads((run_dir / "record.json").read_text())
        events = [json.loads(line) for line in (run_dir / "events.jsonl").open()]
        if keep is not None:
            shutil.copytree(run_dir, keep / outcome["run_id"], dirs_exist_ok=True)
    phases = {name: record["timings"].get(name) or 0.0 for name in INHERENT_PHASES}
    return RunFigures(
        verdict=str(record["verdict"]),
        wall_s=wall_s,
        inherent_s=sum(phases.values()) / 1000,
        phases={name: round(ms / 1000, 1) for name, ms in phases.items()},
        hop_ms=_hop_s(events) * 1000,
        page_s=_page_delay(events),
        outside=_outside_phases(events, record["timings"], started_at, ended_at),
        tree_cpu_s=tree_cpu_s,
        machine_cpu_s=machine_cpu_s,
    )


def _tree_cpu_s() -> float:
    """User and system CPU seconds of every child this process reaped (and theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _machine_busy_s() -> float:
    """The machine's busy CPU seconds since boot: `/proc/stat` minus idle and iowait."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _running_engine(env: dict[str, str], home: Path) -> Iterator[None]:
    """`sreforge up` in the background until the block ends; ready once it advertises."""
    engine = subprocess.Popen(
        [sys.executable, "-m", "sreforge", "up"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (home / "engine.json").exists():
            if engine.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"`sreforge up` did not come up (exit code {engine.poll()})")
            time.sleep(0.1)
        yield
    finally:
        os.killpg(engine.pid, signal.SIGTERM)
        engine.wait(timeout=60)


def _first_seen(events: list[dict[str, object]]) -> dict[str, datetime]:
    seen: dict[str, datetime] = {}
    for event in events:
        body = event.get("event", event)
        if isinstance(body, dict) and "type" in body and "occurred_at" in body:
            seen.setdefault(str(body["type"]), datetime.fromisoformat(str(body["occurred_at"])))
    return seen


def _outside_phases(
    events: list[dict[str, object]],
    timings: dict[str, float | None],
    started_at: datetime,
    ended_at: datetime,
) -> dict[str, float]:
    """The wall time the inherent phases leave out, by where in the run it went."""
    seen = _first_seen(events)
    last = max(seen.values())

    def span(start: datetime | None, end: datetime | None) -> float:
        return round((end - start).total_seconds(), 2) if start and end else float("nan")

    return {
        "start → RunRequested": span(started_at, seen.get("RunRequested")),
        "context": round((timings.get("context") or 0.0) / 1000, 2),
        "Scored → Recorded": span(seen.get("Scored"), seen.get("Recorded")),
        "Recorded → CleanedUp": span(seen.get("Recorded"), seen.get("CleanedUp")),
        "last event → exit": span(last, ended_at),
    }


def _run_triggered(events: list[dict[str, object]]) -> dict[str, object]:
    for event in events:
        body = event.get("event", event)
        if isinstance(body, dict) and body.get("type") == "RunTriggered":
            return body
    raise SystemExit("no RunTriggered in the run's event log")


def _trigger_times(events: list[dict[str, object]]) -> tuple[datetime, datetime, datetime]:
    """(source fired, engine received the page, run triggered)."""
    body = _run_triggered(events)
    trigger = body["trigger"]
    assert isinstance(trigger, dict)
    return (
        datetime.fromisoformat(str(trigger["fired_at"])),
        datetime.fromisoformat(str(trigger["received_at"])),
        datetime.fromisoformat(str(body["occurred_at"])),
    )


def _hop_s(events: list[dict[str, object]]) -> float:
    _, received, triggered = _trigger_times(events)
    return (triggered - received).total_seconds()


def _page_delay(events: list[dict[str, object]]) -> float:
    fired, received, _ = _trigger_times(events)
    return (received - fired).total_seconds()


if __name__ == "__main__":
    sys.exit(main())
