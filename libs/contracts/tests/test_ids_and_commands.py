"""Scenario and run ids, and the `run.start` command: what gets in and what is refused."""

from __future__ import annotations

import re

import pytest
from sreforge_contracts import (
    RUN_ID_PATTERN,
    ContractError,
    RunStart,
    RunStartReply,
    check_run_id,
    check_scenario_id,
    new_run_id,
    parse_run_start,
    run_event_subject,
)


@pytest.mark.parametrize("value", ["latency-cache-stampede", "a", "0day", "db-pool-2"])
def test_valid_scenario_ids_are_accepted(value: str) -> None:
    """Slugs of lowercase letters, digits and dashes pass unchanged."""
    assert check_scenario_id(value) == value


@pytest.mark.parametrize("value", ["../x", "A B", "", "-lead", "Upper", "a/b", "a.b", "a_b"])
def test_bad_scenario_ids_are_rejected_naming_the_field(value: str) -> None:
    """Path tricks, spaces, capitals and empty ids never reach a script or a path."""
    with pytest.raises(ContractError, match=r"^scenario: invalid scenario id") as caught:
        check_scenario_id(value)
    assert caught.value.field == "scenario"


@pytest.mark.parametrize("value", ["ab", "a.b.c", "run 1", "../etc", "RUN-1", "a*", "x" * 65, ""])
def test_bad_run_ids_are_rejected(value: str) -> None:
    """Run ids must be one safe NATS token and one safe directory name."""
    with pytest.raises(ContractError, match="run_id"):
        check_run_id(value)


def test_new_run_ids_are_valid_unique_and_sortable() -> None:
    """Minted ids pass their own validation and do not collide."""
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(RUN_ID_PATTERN, run_id) for run_id in ids)


def test_run_event_subject_refuses_a_run_id_with_dots() -> None:
    """A dotted run id would split the subject into extra tokens."""
    assert run_event_subject("abc-1", "Scored") == "sreforge.run.abc-1.Scored"
    with pytest.raises(ContractError):
        run_event_subject("a.b", "Scored")


def test_run_start_minimal_defaults_and_round_trip() -> None:
    """`nats pub sreforge.run.start '{"scenario":..,"agent":..}'` is a whole command."""
    command = parse_run_start(b'{"scenario": "latency-cache-stampede", "agent": "noop"}')
    assert command.time_scale == 1.0
    assert command.run_id is None
    assert command.labels == {}
    assert RunStart.SUBJECT == "sreforge.run.start"
    assert parse_run_start(command.model_dump_json()) == command


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ('{"scenario": "x", "agent": "noop"', ""),
        ("[]", ""),
        ('{"agent": "noop"}', "scenario"),
        ('{"scenario": "../x", "agent": "noop"}', "scenario"),
        ('{"scenario": "A B", "agent": "noop"}', "scenario"),
        ('{"scenario": "", "agent": "noop"}', "scenario"),
        ('{"scenario": "x"}', "agent"),
        ('{"scenario": "x", "agent": "noop", "time_scale": 0}', "time_scale"),
        ('{"scenario": "x", "agent": "noop", "time_scale": 1.5}', "time_scale"),
        ('{"scenario": "x", "agent": "noop", "time_scale": "fast"}', "time_scale"),
        ('{"scenario": "x", "agent": "noop", "run_id": "a.b"}', "run_id"),
        ('{"scenario": "x", "agent": "noop", "labels": {"k": 1}}', "labels.k"),
        ('{"scenario": "x", "agent": "noop", "colour": "red"}', "colour"),
    ],
)
def test_bad_run_start_names_the_field(payload: str, field: str) -> None:
    """Malformed JSON, wrong types, unknown fields and bad ids give a field-named error."""
    with pytest.raises(ContractError, match=r"^run\.start: ") as caught:
        parse_run_start(payload)
    assert caught.value.field == field
    if field:
        assert f"{field}: " in str(caught.value)
    else:
        assert "malformed JSON" in str(caught.value) or "object" in str(caught.value)


def test_run_start_reply_must_carry_a_run_id_or_a_reason() -> None:
    """A reply is either accepted with its run id, or refused with why."""
    assert RunStartReply(accepted=True, run_id="abc-1").run_id == "abc-1"
    assert RunStartReply(accepted=False, error="unknown scenario 'x'").error
    with pytest.raises(ValueError, match="run_id"):
        RunStartReply(accepted=True)
    with pytest.raises(ValueError, match="error"):
        RunStartReply(accepted=False)


def test_subject_constants_cover_the_stream() -> None:
    """Every subject the services use falls under the one stream's `sreforge.>`."""
    import sreforge_contracts as c

    assert c.STREAM_NAME == "SREFORGE"
    assert c.STREAM_SUBJECTS == ("sreforge.>",)
    assert c.RUNS_BUCKET == "sreforge-runs"
    assert c.RUN_EVENTS_SUBJECTS == ("sreforge.run.*.*",)
    assert c.TRIGGER_SUBJECTS == ("sreforge.trigger.fired", "sreforge.trigger.resolved")
    assert c.run_events_of_type("Deployed") == "sreforge.run.*.Deployed"
    assert c.run_events_filter("abc-1") == "sreforge.run.abc-1.*"
    assert c.DEADLETTER_PREFIX == "sreforge.deadletter."
    assert c.__all__ == sorted(c.__all__, key=lambda n: (not n.isupper(), n[0].islower(), n))
