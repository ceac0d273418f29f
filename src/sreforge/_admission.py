"""Admission: whether one more run may start now, by slots, memory and the cores' budget.

Pure arithmetic over figures the caller reads (`sreforge._machine` reads the machine):
one rule for a campaign (`sreforge.campaign._runner`) and a worker host
(`sreforge._workers`). A run's CPU cost depends on its phase: the stack's boot, CI and
the redeploy are bursts; the incident and the grading window are the stack's steady
load (the load generator at 20 req/s, the app, Prometheus). The grading window is the
phase that must never be starved (its client-side SLI is judged), so the cores are
budgeted by the phases the running runs are in, plus the boot of the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MEASURED_COSTS",
    "PHASES",
    "Admission",
    "Decision",
    "MachineNow",
    "Phase",
    "PhaseCosts",
    "phase_of",
]

Phase = Literal["boot", "incident", "ci", "redeploy", "grading", "teardown"]
PHASES: tuple[Phase, ...] = ("boot", "incident", "ci", "redeploy", "grading", "teardown")
"""A run's phases as admission sees them, in order."""

_PHASE_OF_PROGRESS: dict[str, Phase] = {
    "submitting": "boot",
    "requested": "boot",
    "stack ready": "boot",  # arming: the fault, the api's restart, the warm-up
    "armed": "incident",
    "triggered": "incident",
    "briefed": "incident",
    "submitted": "ci",
    "ci": "redeploy",
    "deployed": "grading",
    "scored": "teardown",
    "failed": "teardown",
    "rejected": "teardown",
    "recorded": "teardown",
    "cleaned up": "teardown",
}


def phase_of(progress_phase: str) -> Phase:
    """The admission phase of a run whose last progress line (`sreforge run`'s phase
    names) is `progress_phase`; an unknown name counts as a boot, the costliest."""
    return _PHASE_OF_PROGRESS.get(progress_phase, "boot")


@dataclass(frozen=True)
class PhaseCosts:
    """The cores one run uses in each phase (CPU seconds / wall seconds of the phase)."""

    boot: float
    incident: float
    ci: float
    redeploy: float
    grading: float
    teardown: float

    def of(self, phase: Phase) -> float:
        """The cores a run in `phase` uses."""
        return float(getattr(self, phase))

    @property
    def burst(self) -> float:
        """The costliest phase: what one run may take at its peak."""
        return max(self.of(phase) for phase in PHASES)

    @property
    def steady(self) -> float:
        """The costlier of the two phases a run spends most of its time in."""
        return max(self.incident, self.grading)


MEASURED_COSTS = PhaseCosts(
    boot=0.35, incident=0.35, ci=1.0, redeploy=0.15, grading=0.5, teardown=0.35
)
"""One reference run of latency-cache-stampede at time scale 0.1 alone on the standard
machine (2 cores), `bench/run_cpu.py`, 2026-12-07: the CPU seconds of the command's whole
process tree (engine, services, stack, CI) over each phase's wall time, rounded up. Boot
6.2 s over 19.3 s (the embedded engine's start included), incident 1.8/5.6, CI 13.7/13.8
(three test sets, one after another: one core), redeploy 2.0/14.7, grading 19.8/41.8
(the load, the app, Prometheus and the oracle sampling ten times a second at this time
scale; less at time scale 1), teardown 0.6/1.8. In a campaign the engine's share is
counted once per run, so these overstate a run a little: admission errs towards waiting."""


@dataclass(frozen=True)
class MachineNow:
    """What the caller read of the machine just now."""

    available_mb: float
    cores: float
    cpu_pressure: float | None = None
    """PSI `some avg10` of `/proc/pressure/cpu` (percent); None where the kernel has none."""


@dataclass(frozen=True)
class Decision:
    """Whether one more run starts now, and why (or why not)."""

    admit: bool
    why: str


@dataclass(frozen=True)
class Admission:
    """At most `concurrency` runs at once; a new one only while the machine has memory for
    one more stack (`stack_mb` over `reserve_mb`), its CPU pressure is at most
    `max_cpu_pressure`, and the cores' budget (`cpu_budget` x cores) carries the running
    runs' phases plus the new run's boot (`costs`)."""

    concurrency: int
    stack_mb: float
    reserve_mb: float
    costs: PhaseCosts = field(default=MEASURED_COSTS)
    cpu_budget: float | None = 1.0
    """None: no CPU budgeting (slots and memory only, the rule before issue 28)."""
    max_cpu_pressure: float = 25.0

    def slots(self, available_mb: float, cores: float) -> int:
        """Runs the machine can carry at once, at least 1 (a campaign always makes
        progress): what fits in memory, what the cores carry (one run at its peak, every
        other in its steady phases), capped by concurrency."""
        in_memory = int((available_mb - self.reserve_mb) // self.stack_mb)
        return max(1, min(self.concurrency, in_memory, self.on_cores(cores)))

    def on_cores(self, cores: float) -> int:
        """Runs `cores` carry with one at its peak and every other in its steady phases
        (`1 + (budget - burst) // steady`), at least 1; `concurrency` without budgeting."""
        if self.cpu_budget is None:
            return self.concurrency
        spare = cores * self.cpu_budget - self.costs.burst
        return 1 + int(spare // self.costs.steady) if spare >= 0 else 1

    def admit(self, running: Sequence[Phase], slots: int, machine: MachineNow) -> Decision:
        """Whether one more run may start now, with runs in `running`'s phases in flight.

        `slots` is the caller's cap (`slots()` read before its first run, or a worker
        host's own); `machine` is read now, so a machine that other work has since filled
        takes no new run. With nothing running a run always starts.
        """
        if not running:
            return Decision(True, "nothing running")
        if len(running) >= slots:
            return Decision(False, f"{len(running)} running fill the {slots} slots")
        if machine.available_mb - self.reserve_mb < self.stack_mb:
            return Decision(False, f"memory: {machine.available_mb:.0f} MB available")
        if self.cpu_budget is None:
            return Decision(True, "a free slot with memory for its stack")
        pressure = machine.cpu_pressure
        if pressure is not None and pressure > self.max_cpu_pressure:
            return Decision(False, f"CPU pressure {pressure:.0f}% > {self.max_cpu_pressure:g}%")
        busy = sum(self.costs.of(phase) for phase in running)
        budget = machine.cores * self.cpu_budget
        if busy + self.costs.boot > budget:
            return Decision(
                False, f"cores: {busy:.1f} busy + {self.costs.boot:.1f} boot > {budget:.1f}"
            )
        return Decision(True, f"cores: {busy:.1f} busy + {self.costs.boot:.1f} boot fit")
