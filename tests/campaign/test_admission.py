"""Admission control: stack slots from memory, capped by concurrency; a new run only
when one more stack fits now."""

from __future__ import annotations

from sreforge.campaign._admission import Admission, available_memory_mb

ADMISSION = Admission(concurrency=6, stack_mb=200.0, reserve_mb=500.0)


def test_slots_are_what_fits_in_memory_capped_by_concurrency() -> None:
    """(available - reserve) // stack, at most the concurrency, at least one."""
    assert ADMISSION.slots(10_000.0) == 6
    assert ADMISSION.slots(1_500.0) == 5
    assert ADMISSION.slots(600.0) == 1
    assert ADMISSION.slots(100.0) == 1


def test_a_run_is_admitted_only_into_a_free_slot_with_memory_for_its_stack() -> None:
    """Below the slots and with room for one more stack: yes; full slots or a machine
    filled since: no; nothing running: always (a campaign never stalls)."""
    assert ADMISSION.admit(running=2, slots=3, available_mb=800.0)
    assert not ADMISSION.admit(running=3, slots=3, available_mb=10_000.0)
    assert not ADMISSION.admit(running=1, slots=3, available_mb=650.0)
    assert ADMISSION.admit(running=0, slots=3, available_mb=10.0)


def test_the_machine_reports_its_available_memory() -> None:
    """psutil's available memory, in MB: a positive figure on any machine that runs this."""
    assert available_memory_mb() > 0
