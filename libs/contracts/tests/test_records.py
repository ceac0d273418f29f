"""run-record.v1, agent-transcript.v1 and diagnosis.v1: round trips, leniency, pruning."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sreforge_contracts import (
    RECORD_VERSION,
    AgentTranscript,
    AgentTranscriptHeader,
    ContractError,
    Diagnosis,
    DiagnosisAxes,
    OracleScore,
    RunRecord,
    canonical_json,
    parse_diagnosis,
    parse_run_record,
)

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def test_record_round_trips_through_json(record: RunRecord) -> None:
    """What the recorder writes, a reader reads back unchanged."""
    assert parse_run_record(record.model_dump_json()) == record
    assert record.record_version == RECORD_VERSION == "1.2.0"
    assert record.kind == "run-record"


def test_readers_ignore_unknown_fields_at_every_level(record: RunRecord) -> None:
    """A v1.x record with new fields (additive-only) is still readable by this reader."""
    data = record.model_dump(mode="json")
    data["record_version"] = "1.4.0"
    data["future_top"] = {"x": 1}
    data["trigger"]["future_trigger"] = "y"
    data["trigger"]["signals"][0]["future_signal"] = True
    data["score"]["signals"][0]["future_detail"] = 3
    data["score"]["sub_scores"] = [dict(data["score"], future_sub=1)]
    data["agent_transcript"]["future_header"] = "z"
    data["sli_series"][0]["future_sample"] = 1.0
    data["timings"]["future_phase"] = 5
    parsed = parse_run_record(json.dumps(data))
    assert parsed.record_version == "1.4.0"
    assert parsed.trigger == record.trigger
    assert parsed.score.sub_scores[0].signals == record.score.signals
    assert parsed.agent_transcript == record.agent_transcript


def test_producers_still_get_the_typo_check(record: RunRecord) -> None:
    """Leniency is for readers: a record built or validated without it rejects a typo."""
    data = record.model_dump(mode="json") | {"abort_reasn": "typo"}
    with pytest.raises(ValueError, match="abort_reasn"):
        RunRecord(**data)
    with pytest.raises(ValueError, match="abort_reasn"):
        RunRecord.model_validate_json(json.dumps(data))
    assert parse_run_record(json.dumps(data)).abort_reason is None


def test_diagnosis_reader_ignores_unknown_fields() -> None:
    """A diagnosis.json from a later judge with extra fields still reads."""
    document = {
        "schema_version": "diagnosis.v1",
        "run_id": "abc-1",
        "scenario": "s",
        "score": 1.0,
        "axes": {
            "root_cause_correct": True,
            "evidence_grounded": True,
            "false_leads": False,
            "per_fact": [],
        },
        "rationale": "r",
        "judge_model": "m",
        "judged_at": "2026-11-29T08:00:00Z",
        "judge_latency_ms": 12,
    }
    assert parse_diagnosis(json.dumps(document)).score == 1.0
    document["score"] = "high"
    with pytest.raises(ContractError, match=r"^diagnosis\.json: score:"):
        parse_diagnosis(json.dumps(document))


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(record_version="2.0.0"), "record_version"),
        (lambda d: d.update(kind="event"), "kind"),
        (lambda d: d.update(verdict="won"), "verdict"),
        (lambda d: d.update(profile="drill"), "profile"),
        (lambda d: d.pop("ci"), "ci"),
        (lambda d: d["trajectory"].update(submitted="perhaps"), "trajectory.submitted"),
        (
            lambda d: d["agent_transcript"].update(confinement="docker"),
            "agent_transcript.confinement",
        ),
        (lambda d: d.update(time_scale=0), "time_scale"),
        (lambda d: d.update(full_record_sha256="nothex"), "full_record_sha256"),
    ],
)
def test_bad_records_name_the_field(record: RunRecord, mutate: object, field: str) -> None:
    """Wrong enums, missing required keys and bad types are refused, naming the field."""
    data = record.model_dump(mode="json")
    assert callable(mutate)
    mutate(data)
    with pytest.raises(ContractError) as caught:
        parse_run_record(json.dumps(data))
    assert caught.value.field == field


def test_aborted_record_without_trigger_ci_or_deploy(score: OracleScore) -> None:
    """A confirm-fire abort still ends in one valid record: no trigger, no ci, no deploy."""
    aborted = RunRecord(
        run_id="abc-1",
        scenario_id="latency-cache-stampede",
        profile="incident",
        trigger=None,
        trajectory={"agent_name": "noop", "diff": "", "submitted": False, "duration_ms": 0},
        diff="",
        ci=None,
        deploy=None,
        score=OracleScore(oracle_id="none", score=0, passed=False, signals=[]),
        verdict="aborted",
        started_at=T0,
        finished_at=T0,
        abort_reason="alert never fired",
    )
    assert parse_run_record(aborted.model_dump_json()) == aborted
    assert not aborted.is_bankable


def test_pruned_record_drops_payloads_and_references_the_full_one(record: RunRecord) -> None:
    """The committed copy loses the runner log and raw agent payload, keeps the header."""
    pruned = record.pruned()
    assert pruned.trajectory.transcript is None
    assert type(pruned.agent_transcript) is AgentTranscriptHeader
    assert pruned.agent_transcript.confinement == "host-open"
    assert pruned.full_record_sha256 == record.sha256()
    assert pruned.is_bankable
    assert pruned.is_smoke
    assert type(parse_run_record(pruned.model_dump_json()).agent_transcript) is (
        AgentTranscriptHeader
    )


def test_a_proof_run_is_labelled_in_the_record_and_its_pruned_copy(record: RunRecord) -> None:
    """An unverified profile's run says so in the record; older records read as not proof runs."""
    data = record.model_dump(mode="json")
    del data["proof_run"]
    assert parse_run_record(json.dumps(data)).proof_run is False
    proof = record.model_copy(update={"proof_run": True})
    assert parse_run_record(proof.model_dump_json()).proof_run is True
    assert proof.pruned().proof_run is True
    assert not proof.is_bankable
    assert record.is_bankable


def test_canonical_json_sorts_keys_and_ends_in_newline(record: RunRecord) -> None:
    """The sha256 is taken over one stable text, whatever the field order in memory."""
    text = record.canonical_json()
    assert text.endswith("}\n")
    assert text == canonical_json(json.loads(text))
    keys = list(json.loads(text))
    assert keys == sorted(keys)


def test_agent_transcript_needs_exactly_one_payload() -> None:
    """agent-transcript.json carries raw_json or raw_text, never both or neither."""
    header = {"run_id": "abc-1", "harness": "codex", "confinement": "in-box", "captured_at": T0}
    assert AgentTranscript(**header, raw_json={"turns": []}).raw_json == {"turns": []}
    for payload in ({}, {"raw_json": [1], "raw_text": "x"}):
        with pytest.raises(ValueError, match="exactly one"):
            AgentTranscript(**header, **payload)


@pytest.mark.parametrize(
    ("axes", "score"),
    [
        ((True, True, False), 1.0),
        ((True, False, False), 0.7),
        ((False, True, True), 0.3),
        ((False, False, False), 0.2),
        ((False, False, True), 0.0),
    ],
)
def test_diagnosis_score_is_the_weighted_axes(axes: tuple[bool, bool, bool], score: float) -> None:
    """diagnosis.v1: 0.5 root cause + 0.3 evidence + 0.2 no false lead."""
    graded = DiagnosisAxes(
        root_cause_correct=axes[0], evidence_grounded=axes[1], false_leads=axes[2]
    )
    assert graded.score() == pytest.approx(score)
    diagnosis = Diagnosis(
        run_id="abc-1",
        scenario="latency-cache-stampede",
        score=score,
        axes=graded,
        rationale="r",
        judge_model="qwen3",
        judged_at=T0,
    )
    assert Diagnosis.model_validate_json(diagnosis.model_dump_json()) == diagnosis


def test_diagnosis_with_a_score_that_disagrees_with_its_axes_is_refused() -> None:
    """The judge's arithmetic is the harness's: a mismatched score is a contract error."""
    axes = DiagnosisAxes(root_cause_correct=True, evidence_grounded=True, false_leads=False)
    with pytest.raises(ValueError, match="does not match the axes"):
        Diagnosis(
            run_id="a",
            scenario="s",
            score=0.5,
            axes=axes,
            rationale="",
            judge_model="m",
            judged_at=T0,
        )
