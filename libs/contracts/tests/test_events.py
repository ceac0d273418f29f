"""The event catalog: round trips, dispatch on `type`, deterministic ids, subjects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sreforge_contracts import (
    EVENT_TYPES,
    AgentContext,
    BriefReady,
    CiResult,
    CiTestSet,
    CleanedUp,
    ContractError,
    Deployed,
    EvalOnly,
    Event,
    FaultArmed,
    OracleScore,
    Recorded,
    RunContract,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    RunWorkspace,
    ScenarioRef,
    Scored,
    SliSample,
    StackReady,
    Submission,
    Submitted,
    Trigger,
    TriggerFired,
    TriggerResolved,
    parse_event,
)

RUN = "20261129-080000-abc123"
T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def _contract() -> RunContract:
    return RunContract(
        agent_context=AgentContext(
            services={"prometheus": "http://127.0.0.1:19090"},
            run_workspace=RunWorkspace(path=f"/tmp/runs/{RUN}/workspace", service="api"),
        ),
        scenario=ScenarioRef(
            id="latency-cache-stampede",
            run_id=RUN,
            expected_alert="BookshelfApiLatencyP99High",
            alert_fired_at=T0,
        ),
        eval_only=EvalOnly(
            alert_to_clear="BookshelfApiLatencyP99High",
            max_clear_time_seconds=60,
            sustained_clear_seconds=36,
        ),
    )


def _catalog(trigger: Trigger, score: OracleScore) -> list[Event]:
    """One instance of every event type, in lifecycle order."""
    resolved = trigger.model_copy(update={"status": "resolved"})
    sample = SliSample(
        at=T0,
        offset_seconds=1.0,
        sli=0.2,
        alert_state="pending",
        firing_alerts=[],
        load_achieved_rps=19.5,
        load_target_rps=20,
    )
    p = "test"
    return [
        RunRequested(
            run_id=RUN,
            producer=p,
            scenario="latency-cache-stampede",
            agent="noop",
            alert_route="r0ute",
        ),
        RunRejected(run_id=RUN, producer=p, reason="unknown scenario", scenario="nope"),
        StackReady(
            run_id=RUN,
            producer=p,
            stack="local",
            run_dir="/tmp/r",
            agent_endpoints={"api": "http://127.0.0.1:5001"},
            operator_endpoints={"api": "http://127.0.0.1:5001"},
        ),
        FaultArmed(run_id=RUN, producer=p, armed_at=T0, delivery_mode="arm-deploy-recent"),
        TriggerFired(producer=p, trigger=trigger),
        TriggerResolved(producer=p, trigger=resolved),
        RunTriggered(run_id=RUN, producer=p, trigger=trigger, alert_fired_at=T0),
        BriefReady(run_id=RUN, producer=p, page="# On call\n", contract=_contract()),
        Submitted(
            run_id=RUN,
            producer=p,
            submission=Submission(
                agent_name="reference",
                diff="diff",
                submitted=True,
                rca="cache removed",
                transcript_ref="agent-transcript.json",
                duration_ms=5,
                evidence={"tool": ["x"]},
            ),
        ),
        CiResult(run_id=RUN, producer=p, green=True, output="ok", duration_ms=3, exit_code=0),
        Deployed(run_id=RUN, producer=p, redeployed=True, service="api", duration_ms=7),
        Scored(run_id=RUN, producer=p, score=score, verdict="passed", sli_series=[sample]),
        Recorded(
            run_id=RUN, producer=p, path="runs/x/record.json", sha256="a" * 64, verdict="passed"
        ),
        CleanedUp(run_id=RUN, producer=p, verified=False, leftovers=["pid 42"]),
        RunFailed(
            run_id=RUN, producer=p, stage="confirm-fire", reason="timeout", verdict="aborted"
        ),
    ]


def test_catalog_covers_every_event_of_the_spec(trigger: Trigger, score: OracleScore) -> None:
    """The fifteen SPEC §3 events exist, and the samples below cover each once."""
    names = [type(event).__name__ for event in _catalog(trigger, score)]
    assert names == list(EVENT_TYPES)
    assert len(names) == 15


def test_every_event_round_trips_through_parse_event(trigger: Trigger, score: OracleScore) -> None:
    """JSON off the wire comes back as the same class with equal content."""
    for event in _catalog(trigger, score):
        parsed = parse_event(event.model_dump_json().encode())
        assert type(parsed) is type(event)
        assert parsed == event
        assert parsed.event_id == event.event_id


def test_run_events_have_deterministic_ids_and_run_subjects(
    trigger: Trigger, score: OracleScore
) -> None:
    """A republished once-per-run event carries the same id, so JetStream dedupes it."""
    for event in _catalog(trigger, score):
        if event.run_id is None:
            continue
        assert event.subject == f"sreforge.run.{RUN}.{event.type}"
        assert event.event_id.startswith(f"{RUN}.{event.type}")
    failed = RunFailed(run_id=RUN, producer="x", stage="ci", reason="r", verdict="error")
    assert failed.event_id == f"{RUN}.RunFailed.ci"


def test_trigger_event_ids_hash_the_alert_occurrence(trigger: Trigger) -> None:
    """Same firing re-sent → same id; another start time or a resolve → another id."""
    first = TriggerFired(producer="trigger", trigger=trigger)
    again = TriggerFired(
        producer="trigger",
        trigger=trigger.model_copy(update={"annotations": {"summary": "reworded"}}),
    )
    later = TriggerFired(
        producer="trigger", trigger=trigger.model_copy(update={"fired_at": T0.replace(minute=1)})
    )
    resolved = TriggerResolved(
        producer="trigger", trigger=trigger.model_copy(update={"status": "resolved"})
    )
    assert first.event_id == again.event_id
    assert first.event_id != later.event_id
    assert resolved.event_id.startswith("trigger.resolved.")
    assert first.run_id is None
    assert first.subject == "sreforge.trigger.fired"
    assert resolved.subject == "sreforge.trigger.resolved"


def test_explicit_event_id_is_kept(trigger: Trigger) -> None:
    """A producer may set its own id (e.g. an external feed's delivery id)."""
    event = TriggerFired(event_id="feed-77", producer="trigger", trigger=trigger)
    assert event.event_id == "feed-77"


def test_run_events_require_a_valid_run_id() -> None:
    """A run event without a run id has no subject; a dotted one would break it."""
    with pytest.raises(ValueError, match="run_id"):
        CleanedUp(producer="d", verified=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="run_id"):
        CleanedUp(run_id="a.b.c", producer="d", verified=True)


@pytest.mark.parametrize(
    ("payload", "field", "fragment"),
    [
        (b"{not json", "", "malformed JSON"),
        (b'"a string"', "", "object"),
        (b"{}", "type", "type: required field missing"),
        (b'{"type": "Exploded", "producer": "x"}', "type", "unknown type 'Exploded'"),
        (
            b'{"type": "CiResult", "run_id": "abc-1", "producer": "d", "green": "maybe",'
            b' "output": "", "duration_ms": 1}',
            "green",
            "event CiResult: green:",
        ),
        (
            b'{"type": "CiResult", "run_id": "abc-1", "producer": "d", "green": true,'
            b' "output": "", "duration_ms": 1, "extra": 1}',
            "extra",
            "extra: unknown field",
        ),
        (
            b'{"type": "CleanedUp", "run_id": "../etc", "producer": "d", "verified": true}',
            "run_id",
            "run_id:",
        ),
        (
            b'{"type": "Recorded", "run_id": "abc-1", "producer": "d", "path": "p",'
            b' "sha256": "xyz", "verdict": "passed"}',
            "sha256",
            "sha256:",
        ),
        (
            b'{"type": "Recorded", "run_id": "abc-1", "producer": "d", "path": "p",'
            b' "sha256": "' + b"a" * 64 + b'", "verdict": "won"}',
            "verdict",
            "verdict:",
        ),
        (
            b'{"type": "TriggerFired", "producer": "t", "trigger": {"source": "am",'
            b' "alert_name": "A", "fired_at": "yesterday"}}',
            "trigger.fired_at",
            "trigger.fired_at:",
        ),
        (
            b'{"type": "Scored", "run_id": "abc-1", "producer": "o", "score": {"score": 2,'
            b' "passed": true, "signals": []}}',
            "score.score",
            "score.score:",
        ),
    ],
)
def test_bad_events_name_the_field(payload: bytes, field: str, fragment: str) -> None:
    """Malformed JSON, wrong types, unknown fields and unknown types are all named."""
    with pytest.raises(ContractError) as caught:
        parse_event(payload)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_ci_test_sets_reach_the_record_and_old_results_still_parse() -> None:
    """The record's `ci` names each test set with its counts; a result without sets is valid."""
    sets = [
        CiTestSet(name="submitted", green=True, exit_code=0, passed=5, duration_ms=10),
        CiTestSet(name="handoff", green=False, exit_code=1, passed=3, failed=1, duration_ms=9),
    ]
    result = CiResult(
        run_id=RUN, producer="d", green=False, output="", duration_ms=20, test_sets=sets
    )
    outcome = parse_event(result.model_dump_json().encode()).outcome()  # type: ignore[union-attr]
    assert outcome.test_sets == sets
    old = b'{"type": "CiResult", "run_id": "abc-1", "producer": "d", "green": true,'
    old += b' "output": "", "duration_ms": 1}'
    parsed = parse_event(old)
    assert isinstance(parsed, CiResult)
    assert parsed.outcome().test_sets is None
