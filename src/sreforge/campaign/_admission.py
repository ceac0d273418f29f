"""Admission control: how many runs may be in flight, by stack slots and free memory.

Pure arithmetic over figures the caller reads (`available_memory_mb` reads the machine).
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

__all__ = ["Admission", "available_memory_mb"]


def available_memory_mb() -> float:
    """The machine's available memory (psutil's `available`: free + reclaimable), in MB."""
    return psutil.virtual_memory().available / 1e6


@dataclass(frozen=True)
class Admission:
    """At most `concurrency` runs at once, and a new one only while the machine has room
    for one more stack (`stack_mb`) on top of `reserve_mb` left for everything else."""

    concurrency: int
    stack_mb: float
    reserve_mb: float

    def slots(self, available_mb: float) -> int:
        """Stack slots the machine has now: runs that fit in memory, capped by concurrency,
        at least 1 (a campaign always makes progress, one run at a time)."""
        fit = int((available_mb - self.reserve_mb) // self.stack_mb)
        return max(1, min(self.concurrency, fit))

    def admit(self, running: int, slots: int, available_mb: float) -> bool:
        """Whether one more run may start now, with `running` in flight.

        `slots` was read before the campaign's first run (`slots`, while no stack of its
        own took memory); `available_mb` is read now, so a machine that other work has
        since filled takes no new stack. With nothing running a run always starts.
        """
        if running == 0:
            return True
        return running < slots and available_mb - self.reserve_mb >= self.stack_mb
