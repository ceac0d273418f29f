"""Reading the machine for admission: available memory, cores, CPU pressure.

Each reader is one small function; `sreforge._admission` decides over what they read.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from sreforge._admission import MachineNow

__all__ = ["available_memory_mb", "cores", "cpu_pressure", "machine_now", "parse_psi_some_avg10"]

PSI_CPU = Path("/proc/pressure/cpu")


def available_memory_mb() -> float:
    """The machine's available memory (psutil's `available`: free + reclaimable), in MB."""
    return psutil.virtual_memory().available / 1e6


def cores() -> float:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return float(os.cpu_count() or 1)


def parse_psi_some_avg10(text: str) -> float | None:
    """`some avg10` (percent of the last 10 s some task waited for a CPU) from the text of
    a PSI file, None when the line or the field is missing or malformed."""
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != "some":
            continue
        for word in words[1:]:
            name, _, value = word.partition("=")
            if name == "avg10":
                try:
                    return float(value)
                except ValueError:
                    return None
    return None


def cpu_pressure(path: Path = PSI_CPU) -> float | None:
    """The machine's CPU pressure (`some avg10` of `path`), None without PSI."""
    try:
        return parse_psi_some_avg10(path.read_text())
    except OSError:
        return None


def machine_now() -> MachineNow:
    """The machine as admission reads it now."""
    return MachineNow(available_memory_mb(), cores(), cpu_pressure())
