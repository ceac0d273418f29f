"""Admission control: slots from memory and the cores, capped by concurrency; a new run only
while one more stack fits in memory, the CPU is not under pressure and the cores' budget
carries the running runs' phases plus the new run's boot."""

from __future__ import annotations

from pathlib import Path

import pytest

from sreforge._admission import (
    MEASURED_COSTS,
    PHASES,
    Admission,
    MachineNow,
    Phase,
    PhaseCosts,
    phase_of,
)
from sreforge._machine import available_memory_mb, cores, cpu_pressure, parse_psi_some_avg10

COSTS = PhaseCosts(boot=0.4, incident=0.3, ci=1.0, redeploy=0.2, grading=0.5, teardown=0.1)
BY_CPU = Admission(concurrency=10, stack_mb=200.0, reserve_mb=500.0, costs=COSTS,
                   cpu_budget=1.0, max_cpu_pressure=25.0)  # fmt: skip
BY_MEMORY = Admission(concurrency=6, stack_mb=200.0, reserve_mb=500.0, cpu_budget=None)
ROOMY = 20_000.0


def quiet(cores: float = 2.0, available_mb: float = ROOMY) -> MachineNow:
    """A machine with memory to spare and no CPU pressure."""
    return MachineNow(available_mb=available_mb, cores=cores, cpu_pressure=0.0)


def test_slots_by_memory_alone_are_what_fits_capped_by_concurrency() -> None:
    """(available - reserve) // stack, at most the concurrency, at least one."""
    assert BY_MEMORY.slots(10_000.0, cores=2.0) == 6
    assert BY_MEMORY.slots(1_500.0, cores=2.0) == 5
    assert BY_MEMORY.slots(600.0, cores=2.0) == 1
    assert BY_MEMORY.slots(100.0, cores=2.0) == 1


@pytest.mark.parametrize(
    ("cores", "available_mb", "slots"),
    [
        (2.0, ROOMY, 3),  # one CI (1.0) + two grading windows (0.5 each) = 2.0
        (1.0, ROOMY, 1),  # one CI fills the core
        (0.5, ROOMY, 1),  # less than one burst: still one, a campaign makes progress
        (8.0, ROOMY, 10),  # 15 would fit: capped by concurrency
        (8.0, 1_300.0, 4),  # memory is the tighter bound
    ],
)
def test_slots_by_cpu_carry_one_run_at_its_peak_and_the_rest_steady(
    cores: float, available_mb: float, slots: int
) -> None:
    """Ten asked for on 2 cores is three: every run may be grading while one is in CI."""
    assert BY_CPU.slots(available_mb, cores) == slots


@pytest.mark.parametrize(
    ("running", "machine", "admit", "why"),
    [
        ([], MachineNow(10.0, 0.5, 99.0), True, "nothing running"),
        (["grading"] * 3, quiet(cores=64.0), False, "fill the 3 slots"),
        (["grading"], quiet(available_mb=650.0), False, "memory"),
        (["incident"], MachineNow(ROOMY, 2.0, 25.5), False, "CPU pressure 26% > 25%"),
        (["incident"], MachineNow(ROOMY, 2.0, 25.0), True, "fit"),
        (["incident"], MachineNow(ROOMY, 2.0, None), True, "fit"),  # no PSI: cores only
        (["ci", "grading"], quiet(), True, "1.5 busy + 0.4 boot fit"),
        (["ci", "ci"], quiet(), False, "cores: 2.0 busy + 0.4 boot > 2.0"),
        (["boot", "boot"], quiet(), True, "0.8 busy"),
        (["ci", "ci"], quiet(cores=8.0), True, "fit"),
    ],
)
def test_a_run_is_admitted_only_into_a_free_slot_the_memory_and_the_cores_can_carry(
    running: list[Phase], machine: MachineNow, admit: bool, why: str
) -> None:
    """Each refusal names what is short; nothing running always admits (no stall)."""
    decision = BY_CPU.admit(running, slots=3, machine=machine)
    assert (decision.admit, why in decision.why) == (admit, True), decision


def test_a_grading_window_leaves_no_room_for_a_boot_the_cores_cannot_carry() -> None:
    """Three grading on two cores (1.5) take a boot (0.4); with a CI under way they do not."""
    grading: list[Phase] = ["grading", "grading"]
    assert BY_CPU.admit([*grading, "grading"], slots=4, machine=quiet()).admit
    assert not BY_CPU.admit([*grading, "ci"], slots=4, machine=quiet()).admit


def test_memory_only_admission_ignores_the_cores_and_the_pressure() -> None:
    """`admit_by_cpu = false` is the rule before issue 28: slots and memory."""
    starved = MachineNow(ROOMY, 2.0, 95.0)
    assert BY_MEMORY.admit(["ci"] * 5, slots=6, machine=starved).admit
    assert not BY_MEMORY.admit(["ci"] * 6, slots=6, machine=starved).admit
    assert not BY_MEMORY.admit(["boot"], slots=6, machine=MachineNow(650.0, 2.0)).admit


@pytest.mark.parametrize(
    ("progress", "phase"),
    [
        ("submitting", "boot"),
        ("requested", "boot"),
        ("stack ready", "boot"),
        ("armed", "incident"),
        ("triggered", "incident"),
        ("briefed", "incident"),
        ("submitted", "ci"),
        ("ci", "redeploy"),
        ("deployed", "grading"),
        ("scored", "teardown"),
        ("failed", "teardown"),
        ("recorded", "teardown"),
        ("cleaned up", "teardown"),
        ("something new", "boot"),
    ],
)
def test_a_runs_progress_line_names_its_admission_phase(progress: str, phase: Phase) -> None:
    """The campaign knows each trial's phase from its last progress line; an unknown one
    counts as the costliest start."""
    assert phase_of(progress) == phase


def test_the_measured_costs_make_ci_the_burst_and_grading_the_steady_phase() -> None:
    """The defaults come from `bench/run_cpu.py`: CI takes a core, grading half of one."""
    assert MEASURED_COSTS.burst == MEASURED_COSTS.ci == 1.0
    assert MEASURED_COSTS.steady == MEASURED_COSTS.grading
    assert all(MEASURED_COSTS.of(phase) > 0 for phase in PHASES)


@pytest.mark.parametrize(
    ("text", "avg10"),
    [
        ("some avg10=8.97 avg60=10.92 avg300=12.09 total=147992020\n"
         "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 8.97),
        ("full avg10=3.00 avg60=0 avg300=0 total=0\nsome avg10=41.50 total=1\n", 41.5),
        ("some avg60=1.00 total=1\n", None),
        ("some avg10=lots\n", None),
        ("", None),
    ],
)  # fmt: skip
def test_cpu_pressure_is_some_avg10_of_the_psi_file(text: str, avg10: float | None) -> None:
    """Only the `some` line counts (on CPU, `full` is 0 or undefined)."""
    assert parse_psi_some_avg10(text) == avg10


def test_no_psi_file_reads_as_no_pressure_figure(tmp_path: Path) -> None:
    """A kernel without PSI: admission budgets the cores alone."""
    assert cpu_pressure(tmp_path / "absent") is None
    (tmp_path / "cpu").write_text("some avg10=12.50 avg60=1 avg300=1 total=9\n")
    assert cpu_pressure(tmp_path / "cpu") == 12.5


def test_the_machine_reports_its_memory_and_cores() -> None:
    """psutil's available memory in MB and the cores this process may use: positive."""
    assert available_memory_mb() > 0
    assert cores() >= 1


def test_what_the_cores_carry_is_one_burst_and_the_rest_steady() -> None:
    """A worker host caps its own slots by this; without budgeting it is no cap."""
    assert [BY_CPU.on_cores(cores) for cores in (0.5, 1.0, 1.49, 1.5, 2.0, 4.0)] == [
        1, 1, 1, 2, 3, 7,
    ]  # fmt: skip
    assert BY_MEMORY.on_cores(0.5) == BY_MEMORY.concurrency
