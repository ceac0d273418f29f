"""Folding a run's events into its record: verdicts, sections, timings (pure, no I/O)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from sreforge_contracts import CiTestSet, Event, RunRecord
from sreforge_contracts.schemas import SCHEMA_DIR
from sreforge_recorder import RecordSchema, RunNotEnded, assemble_record, submission_of

SCHEMA = RecordSchema(SCHEMA_DIR / "run-record.v1.schema.json")


def assemble(story: Any, events: list[Event], **extra: Any) -> RunRecord:
    """Assemble `events` as logged in this order, recorded 2 s after the last one."""
    recorded_at = max(event.occurred_at for event in events) + timedelta(seconds=2)
    record = assemble_record(
        story.logged(events), recorded_at=recorded_at, engine_version="0.1.0", **extra
    )
    SCHEMA.check(record, "test record")
    return record


def test_happy_path_gives_a_passed_record_with_every_phase_timing(story: Any) -> None:
    """A whole run carries trigger, trajectory, ci, deploy, score, sli_series and timings."""
    record = assemble(story, story.happy())
    assert record.verdict == "passed"
    assert record.run_id == "run-0001"
    assert record.scenario_id == "latency-cache-stampede"
    assert record.profile == "incident"
    assert record.trigger is not None
    assert record.trigger.alert_name == "BookshelfApiLatencyP99High"
    assert record.trajectory.agent_name == "reference"
    assert record.trajectory.submitted is True
    assert record.diff == record.trajectory.diff != ""
    assert record.ci is not None
    assert record.ci.green
    assert record.deploy is not None
    assert record.deploy.readiness == "passed"
    assert record.score.passed
    assert record.score.score == pytest.approx(0.95)
    assert record.sli_series is not None
    assert len(record.sli_series) == 10
    assert record.time_scale == 0.1
    assert record.topology == "local", "from StackReady (what the deployer resolved)"
    assert record.engine_version == "0.1.0"
    assert record.abort_reason is None
    assert record.started_at == story.at(0)
    assert record.finished_at == story.at(185)
    timings = record.timings.model_dump()
    expected = {
        "stack": 5_000,
        "arm": 2_000,
        "trigger": 24_000,
        "context": 1_000,
        "run": 60_000,
        "ci": 18_000,
        "redeploy": 15_000,
        "verify": 60_000,
        "record": 2_000,
    }
    assert {name: timings[name] for name in expected} == expected


def test_the_runner_log_has_one_line_per_event(story: Any) -> None:
    """trajectory.transcript is the engine's log: one line per event, in order."""
    record = assemble(story, story.happy())
    lines = (record.trajectory.transcript or "").splitlines()
    assert len(lines) == 9
    assert "RunRequested" in lines[0]
    assert "scenario=latency-cache-stampede" in lines[0]
    assert "Scored" in lines[-1]
    assert "passed=True" in lines[-1]


def test_events_are_folded_in_stream_order_whatever_order_they_arrive(story: Any) -> None:
    """Redeliveries arrive late; the record depends only on stream sequence."""
    logged = story.logged(story.happy())
    shuffled = logged[:]
    random.Random(4).shuffle(shuffled)
    at = story.at(200)
    assert assemble_record(shuffled, recorded_at=at) == assemble_record(logged, recorded_at=at)


def test_events_after_the_end_never_change_the_record(story: Any) -> None:
    """The first terminal event ends the run: CleanedUp or a late RunFailed are ignored."""
    late = [story.cleaned_up(), story.failed("cleanup", "port still bound", "error", at=191)]
    at = story.at(200)
    plain = assemble_record(story.logged(story.happy()), recorded_at=at)
    extended = assemble_record(story.logged(story.happy() + late), recorded_at=at)
    assert extended == plain


def test_a_score_below_threshold_is_failed(story: Any) -> None:
    """CI green and deployed, but the oracle did not pass it: verdict failed."""
    events = [*story.happy()[:-1], story.scored(passed=False)]
    record = assemble(story, events)
    assert record.verdict == "failed"
    assert record.score.score == pytest.approx(0.25)


def test_red_ci_is_rejected_with_the_ci_output(story: Any) -> None:
    """A submission that breaks the tests: verdict rejected, CI output kept, no deploy."""
    output = "FAILED tests/test_cache.py::test_ttl - assert 30 == 0\n1 failed, 11 passed"
    events = [
        *story.happy()[:6],
        story.ci(green=False, output=output),
        story.scored(passed=False, ci_green=False, at=111),
    ]
    record = assemble(story, events)
    assert record.verdict == "rejected"
    assert record.ci is not None
    assert record.ci.output == output
    assert record.ci.exit_code == 1
    assert record.deploy is None
    assert record.timings.redeploy is None
    assert record.timings.verify is None
    assert record.timings.ci == 18_000


def test_the_record_names_the_ci_test_sets_that_ran_with_their_counts(story: Any) -> None:
    """The hand-off set that turned CI red is in the record, counts and all, schema-valid."""
    sets = [
        CiTestSet(name="submitted", green=True, exit_code=0, passed=12, duration_ms=3_000),
        CiTestSet(name="handoff", green=False, exit_code=1, passed=10, failed=2, duration_ms=3_100),
    ]
    events = [
        *story.happy()[:6],
        story.ci(green=False).model_copy(update={"test_sets": sets}),
        story.scored(passed=False, ci_green=False, at=111),
    ]
    record = assemble(story, events)
    assert record.verdict == "rejected"
    assert record.ci is not None
    assert record.ci.test_sets == sets


def test_confirm_fire_timeout_is_aborted_with_its_reason(story: Any) -> None:
    """The alert never fired: aborted, the reason kept, the confirm-fire wait timed."""
    events = [
        story.requested(),
        story.stack_ready(),
        story.fault_armed(),
        story.failed("confirm-fire", "alert did not fire within 24s", at=31),
    ]
    record = assemble(story, events)
    assert record.verdict == "aborted"
    assert record.abort_reason == "confirm-fire: alert did not fire within 24s"
    assert record.trigger is None
    assert record.ci is None
    assert record.deploy is None
    assert record.score.passed is False
    assert record.score.score == 0
    assert record.sli_series is None
    assert record.timings.trigger == 24_000
    assert record.timings.context is None


def test_an_engine_crash_is_error_with_its_reason(story: Any) -> None:
    """A handler crash mid-CI: verdict error, the phase cut short timed to the failure."""
    events = [*story.happy()[:6], story.failed("ci", "KeyError: 'workspace'", "error", at=95)]
    record = assemble(story, events)
    assert record.verdict == "error"
    assert record.abort_reason == "ci: KeyError: 'workspace'"
    assert record.trajectory.submitted is True
    assert record.timings.ci == 3_000


def test_a_rejected_start_is_recorded_as_aborted(story: Any) -> None:
    """run.start refused for an invalid scenario id still leaves a schema-valid record."""
    record = assemble(story, [story.rejected("invalid scenario id 'Bad Id!'", "Bad Id!")])
    assert record.verdict == "aborted"
    assert record.scenario_id == "unknown"
    assert record.abort_reason == "run.start rejected: invalid scenario id 'Bad Id!'"


@pytest.mark.parametrize(
    "kept",
    [
        ["requested", "failed"],
        ["failed"],
        ["scored"],
        ["submitted", "scored"],
        ["requested", "triggered", "deployed", "scored"],
    ],
)
def test_missing_events_still_give_a_schema_valid_record(story: Any, kept: list[str]) -> None:
    """Whatever subset of events arrived, the run's end yields a valid record."""
    available = {
        "requested": story.requested(),
        "triggered": story.triggered(),
        "submitted": story.submitted(),
        "deployed": story.deployed(),
        "scored": story.scored(),
        "failed": story.failed("stack", "port in use", "error", at=3),
    }
    record = assemble(story, [available[name] for name in kept])
    assert record.run_id == "run-0001"
    assert record.verdict in {"passed", "error"}


def test_a_run_without_a_terminal_event_has_no_record_yet(story: Any) -> None:
    """Assembly refuses a run that has not ended, naming the run."""
    with pytest.raises(RunNotEnded, match="run-0001"):
        assemble_record(story.logged(story.happy()[:-1]), recorded_at=story.at(200))


def test_the_agent_transcript_is_carried_whole(story: Any) -> None:
    """The full record holds the labelled agent transcript, raw payload included."""
    transcript = story.transcript()
    record = assemble(story, story.happy(), agent_transcript=transcript)
    assert record.agent_transcript == transcript
    assert submission_of(story.logged(story.happy())) is not None


def test_a_proof_run_is_labelled_in_the_record(story: Any) -> None:
    """The gateway's proof_run evidence becomes the record's label; other runs are unlabelled."""
    assert assemble(story, story.happy(proof_run=True)).proof_run is True
    assert assemble(story, story.happy()).proof_run is False


def test_the_record_says_the_topology_the_deployer_resolved(story: Any) -> None:
    """A request naming no topology takes the stack's (StackReady's); a run that never got
    a stack says what its request named, or nothing."""
    events = story.happy()
    ready = next(i for i, event in enumerate(events) if event.type == "StackReady")
    events[ready] = events[ready].model_copy(update={"topology": "compose"})
    assert assemble(story, events).topology == "compose"
    unprovisioned = [event for event in events if event.type != "StackReady"]
    assert assemble(story, unprovisioned).topology is None
