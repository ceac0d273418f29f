"""A patch run's transitions: no alert to wait for, triggered at arming by its task."""

from __future__ import annotations

from dataclasses import replace

from sreforge_correlator import announcements, fold, overdue
from sreforge_correlator._machine import TASK_SOURCE

from .conftest import CLOCK, at, fault_armed, requested, stack_ready

PATCH_CLOCK = replace(CLOCK, triggered_at_arm=True)


def test_a_patch_run_is_triggered_at_arming_by_its_task() -> None:
    """FaultArmed of a patch run (its workspace ready) hands it to the agent at once."""
    state = fold(fold(requested(), stack_ready(), PATCH_CLOCK), fault_armed(seconds=2), PATCH_CLOCK)
    assert state.phase == "triggered"
    assert state.trigger is not None
    assert state.trigger.source == TASK_SOURCE
    assert state.alert_fired_at == at(2)
    (triggered,) = announcements(state)
    assert triggered.type == "RunTriggered"


def test_a_patch_run_is_never_overdue_for_confirm_fire() -> None:
    """No alert is awaited, so the confirm-fire deadline cannot fail it."""
    state = fold(fold(requested(), stack_ready(), PATCH_CLOCK), fault_armed(), PATCH_CLOCK)
    assert overdue(state, at(10_000)) is None


def test_an_incident_run_still_waits_for_its_alert() -> None:
    """Without the patch flag arming leaves the run armed, waiting for the alert."""
    state = fold(fold(requested(), stack_ready(), CLOCK), fault_armed(), CLOCK)
    assert state.phase == "armed"
