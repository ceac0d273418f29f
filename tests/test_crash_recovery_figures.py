"""The crash-recovery bench's figures: read from a struck run's own logs and stream,
and its waves of cases beside controls."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from wholerun._crash import Fault
from wholerun._recovery import log_times, median, recovery

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import crash_recovery

AT = datetime(2026, 12, 2, 5, 0, 0, tzinfo=UTC)


def _line(event: str, after_s: float, **more: object) -> str:
    stamp = (AT + timedelta(seconds=after_s)).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": event, "timestamp": stamp, **more})


@pytest.mark.timeout(10)
def test_a_killed_service_is_timed_from_its_own_log_after_the_fault() -> None:
    """Start-up is the new process's engine.ready, the resumption its first redelivery;
    the old process's lines (before the fault) and other services' do not count."""
    runner = "\n".join(
        [
            _line("engine.ready", -60),
            _line("message redelivered", -30),
            "Traceback (most recent call last): not JSON",
            _line("engine.ready", 2.5),
            _line("message redelivered", 4.0),
            _line("message redelivered", 9.0),
        ]
    )
    logs = {"runner": runner, "deployer": _line("message redelivered", 1.0)}
    events = [("BriefReady", AT - timedelta(seconds=5)), ("Submitted", AT + timedelta(seconds=7))]
    found = recovery("runner", AT, logs, events, outage_s=5)
    assert (found.started_s, found.redelivered_s, found.next_event_s) == (2.5, 4.0, 7.0)
    assert found.resumed_s == 4.0


@pytest.mark.timeout(10)
def test_without_a_redelivery_the_run_resumes_at_its_next_event_after_the_restart() -> None:
    """Nothing was in flight: the next event after the restart is when the run went on;
    an event between the fault and the restart does not count."""
    logs = {"trigger": _line("engine.ready", 3.0)}
    events = [
        ("StackReady", AT + timedelta(seconds=1)),
        ("TriggerFired", AT + timedelta(seconds=8)),
    ]
    found = recovery("trigger", AT, logs, events, outage_s=5)
    assert (found.redelivered_s, found.next_event_s, found.resumed_s) == (None, 8.0, 8.0)


@pytest.mark.timeout(10)
def test_a_nats_outage_restarts_when_it_ends_and_any_service_may_redeliver() -> None:
    """No start-up for the server; its restart is the outage's end."""
    logs = {"oracle": _line("message redelivered", 6.0), "runner": _line("engine.ready", -50)}
    events = [("Scored", AT + timedelta(seconds=3)), ("Recorded", AT + timedelta(seconds=6.5))]
    found = recovery("nats", AT, logs, events, outage_s=5)
    assert (found.started_s, found.redelivered_s, found.next_event_s) == (None, 6.0, 6.5)


@pytest.mark.timeout(10)
def test_log_times_reads_only_the_named_event() -> None:
    """A line that merely mentions the event name elsewhere is not it."""
    text = "\n".join([_line("engine.ready", 1), _line("other", 2, note="engine.ready")])
    assert log_times(text, "engine.ready") == [AT + timedelta(seconds=1)]


@pytest.mark.timeout(10)
def test_median_skips_unknown_values() -> None:
    """One missing wall does not make the controls' median unknown."""
    assert median([110.0, None, 130.0, 120.0]) == 120.0
    assert median([None]) is None


@pytest.mark.timeout(10)
def test_every_agent_gets_the_least_controls_and_every_wave_one_per_agent() -> None:
    """Each wave holds its cases and a control of each of their agents; control-only
    waves (`parallel` runs at most) top every agent up to the least count; plan names are unique."""
    cases = [
        (Fault("runner", "agent"), "slow"),
        (Fault("deployer", "ci"), "reference"),
        (Fault("oracle", "grading"), "reference"),
    ]
    waves = crash_recovery._waves(cases, parallel=2, least=3)
    assert [[p.agent for p in wave if not p.faults] for wave in waves[:2]] == [
        ["reference", "slow"],
        ["reference"],
    ]
    controls = [p for wave in waves for p in wave if not p.faults]
    assert sorted(p.agent for p in controls) == ["reference"] * 3 + ["slow"] * 3
    assert all(len(wave) <= 2 for wave in waves[2:])  # control-only: `parallel` at most
    names = [p.name for wave in waves for p in wave]
    assert len(names) == len(set(names))
