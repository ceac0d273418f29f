"""The artifact layout: event log, write-once schema-checked record, the record bank."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import ContractError, RunRecord, parse_run_record
from sreforge_recorder import (
    LoggedEvent,
    RecordBank,
    RecorderError,
    RecordInvalid,
    RecordSchema,
    RunArtifacts,
    RunFolder,
    assemble_record,
    read_agent_transcript,
)


@pytest.fixture
def schema(settings: Any) -> RecordSchema:
    """The committed run-record.v1 schema."""
    return RecordSchema(settings.schema_path)


@pytest.fixture
def folder(settings: Any) -> RunFolder:
    """The run folder of `run-0001` under the test's runs dir."""
    return RunFolder(settings.runs_dir, "run-0001")


def passed_record(story: Any, **extra: Any) -> RunRecord:
    """The happy run's record."""
    return assemble_record(story.logged(story.happy()), recorded_at=story.at(187), **extra)


def test_schema_refuses_an_invalid_record_naming_the_field(
    story: Any, folder: RunFolder, schema: RecordSchema
) -> None:
    """A record that slipped past the model is refused before anything is written."""
    good = passed_record(story)
    bad = RunRecord.model_construct(**{**dict(good), "verdict": "maybe"})
    with pytest.raises(RecordInvalid) as caught:
        folder.write_record(bad, schema, RunArtifacts(diff="x"))
    assert "record.json: not a valid run-record.v1: verdict: 'maybe' is not one of" in str(
        caught.value
    )
    assert not folder.record_path.exists()
    assert not (folder.path / "diff.patch").exists()


def test_the_record_is_written_once_and_never_overwritten(
    story: Any, folder: RunFolder, schema: RecordSchema
) -> None:
    """A second write (a redelivered end, a racing recorder) leaves the first record."""
    first = passed_record(story)
    assert folder.write_record(first, schema, RunArtifacts()) is True
    other = first.model_copy(update={"verdict": "failed"})
    assert folder.write_record(other, schema, RunArtifacts()) is False
    assert folder.record_path.read_text() == first.canonical_json()
    assert folder.read_record() == first
    assert folder.record_sha256() == first.sha256()
    assert [p.name for p in folder.path.iterdir() if p.name.endswith(".tmp")] == []


def test_artifacts_are_written_beside_the_record(
    story: Any, folder: RunFolder, schema: RecordSchema
) -> None:
    """diff.patch, rca.txt and agent-transcript.json accompany record.json."""
    transcript = story.transcript()
    record = passed_record(story, agent_transcript=transcript)
    artifacts = RunArtifacts(diff=record.diff, rca="cache TTL was 0", agent_transcript=transcript)
    folder.write_record(record, schema, artifacts)
    assert (folder.path / "diff.patch").read_text() == record.diff
    assert (folder.path / "rca.txt").read_text() == "cache TTL was 0"
    saved = json.loads((folder.path / "agent-transcript.json").read_text())
    assert saved["raw_text"] == "applied the held-out fix\n"
    assert saved["confinement"] == "host-sandboxed"


def test_events_are_logged_once_per_event_id_in_stream_order(story: Any, folder: RunFolder) -> None:
    """Duplicates (same event id, new sequence) are dropped; late arrivals slot in order."""
    events = story.logged(story.happy())
    for logged in [events[0], events[2], events[1], events[3]]:
        assert folder.add_event(logged) is True
    duplicate = LoggedEvent(seq=99, subject=events[2].subject, event=events[2].event)
    assert folder.add_event(duplicate) is False
    assert [logged.seq for logged in folder.events()] == [1, 2, 3, 4]
    lines = folder.events_path.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3, 4]
    assert json.loads(lines[0])["event"]["type"] == "RunRequested"
    transcript = folder.transcript_path.read_text().splitlines()
    assert [line.split()[1] for line in transcript] == [
        "RunRequested",
        "StackReady",
        "FaultArmed",
        "RunTriggered",
    ]


def test_a_torn_last_line_is_dropped_and_the_log_repaired(story: Any, folder: RunFolder) -> None:
    """A crash mid-append leaves a partial line; it is ignored and the log rewritten whole."""
    events = story.logged(story.happy())
    folder.add_event(events[0])
    with folder.events_path.open("a") as log:
        log.write('{"seq": 2, "subj')
    assert [logged.seq for logged in folder.events()] == [1]
    folder.add_event(events[1])
    assert [json.loads(line)["seq"] for line in folder.events_path.read_text().splitlines()] == [
        1,
        2,
    ]


def test_a_run_id_that_is_not_a_safe_name_is_refused(settings: Any) -> None:
    """A run id never escapes the runs dir."""
    with pytest.raises(ContractError, match="run_id"):
        RunFolder(settings.runs_dir, "../etc")


def test_banking_prunes_into_the_scenario_and_stores_the_full_record(
    story: Any, settings: Any, schema: RecordSchema
) -> None:
    """Pruned copy: identity header + full_record_sha256, no transcripts; full one by sha."""
    record = passed_record(story, agent_transcript=story.transcript())
    bank = RecordBank(settings.store_dir, settings.records_root)
    banking = bank.bank(record, schema, allow_unlabelled=False)
    sha = record.sha256()
    assert banking.banked
    assert banking.refusal is None
    assert banking.store_path == settings.store_dir / "sha256" / sha[:2] / f"{sha}.json"
    stored = banking.store_path.read_bytes()
    assert hashlib.sha256(stored).hexdigest() == sha
    expected = (
        settings.records_root / "bookshelf/scenarios/latency-cache-stampede/records/run-0001.json"
    )
    assert banking.pruned_path == expected
    pruned = json.loads(expected.read_text())
    assert pruned["full_record_sha256"] == sha
    assert pruned["trajectory"]["transcript"] is None
    header = pruned["agent_transcript"]
    assert "raw_text" not in header
    assert "raw_json" not in header
    assert header["confinement"] == "host-sandboxed"
    assert header["harness"] == "reference"
    assert parse_run_record(expected.read_text()).full_record_sha256 == sha
    assert bank.bank(record, schema, allow_unlabelled=False) == banking


def test_banking_refuses_a_verdict_without_a_labelled_transcript(
    story: Any, settings: Any, schema: RecordSchema
) -> None:
    """A verdict whose confinement is unknown is not banked unless the operator allows it."""
    record = passed_record(story)
    bank = RecordBank(settings.store_dir, settings.records_root)
    refused = bank.bank(record, schema, allow_unlabelled=False)
    assert refused.banked is False
    assert refused.refusal is not None
    assert "no agent_transcript" in refused.refusal
    assert not settings.store_dir.exists()
    assert list(settings.records_root.rglob("*.json")) == []
    allowed = bank.bank(record, schema, allow_unlabelled=True)
    assert allowed.banked
    assert allowed.store_path is not None
    assert allowed.store_path.exists()


@pytest.mark.parametrize("allow_unlabelled", [False, True])
def test_banking_refuses_a_proof_run_whatever_its_label(
    story: Any, settings: Any, schema: RecordSchema, allow_unlabelled: bool
) -> None:
    """An unverified profile's run is never banked, even labelled or with the override."""
    events = story.happy(proof_run=True)
    record = assemble_record(
        story.logged(events), recorded_at=story.at(187), agent_transcript=story.transcript()
    )
    bank = RecordBank(settings.store_dir, settings.records_root)
    refused = bank.bank(record, schema, allow_unlabelled=allow_unlabelled)
    assert refused.banked is False
    assert refused.refusal is not None
    assert "proof run of an unverified profile" in refused.refusal
    assert "`sreforge agents check reference`" in refused.refusal
    assert not settings.store_dir.exists()
    assert list(settings.records_root.rglob("*.json")) == []


@pytest.mark.parametrize("verdict", ["aborted", "error"])
def test_an_aborted_or_error_run_stays_in_runs_and_is_not_banked(
    story: Any, settings: Any, schema: RecordSchema, verdict: str
) -> None:
    """Aborted/error records graded nothing the agent did: banking refuses them, says why,
    and writes nothing to the store or the scenario's records, even with unlabelled allowed."""
    events = [story.requested(), story.failed("stack", "port in use", at=2, verdict=verdict)]
    record = assemble_record(story.logged(events), recorded_at=story.at(3))
    assert record.verdict == verdict
    banking = RecordBank(settings.store_dir, settings.records_root).bank(
        record, schema, allow_unlabelled=True
    )
    assert not banking.banked
    assert banking.refusal is not None
    assert f"verdict {verdict!r} measured nothing about the agent" in banking.refusal
    assert not settings.store_dir.exists()
    assert list(settings.records_root.rglob("*.json")) == []


def test_no_pruned_record_without_a_scenario_folder(
    story: Any, tmp_path: Path, schema: RecordSchema
) -> None:
    """A scenario with no folder under the records root gets only the full-store entry."""
    record = passed_record(story, agent_transcript=story.transcript())
    banking = RecordBank(tmp_path / "store", tmp_path / "empty").bank(
        record, schema, allow_unlabelled=False
    )
    assert banking.banked
    assert banking.pruned_path is None


def test_an_unreadable_agent_transcript_names_its_file(tmp_path: Path, story: Any) -> None:
    """A transcript ref to a bad file raises ContractError naming the file."""
    (tmp_path / "agent.json").write_text('{"harness": "x"}')
    with pytest.raises(ContractError, match=r"agent\.json"):
        read_agent_transcript("agent.json", tmp_path)
    good = tmp_path / "good.json"
    good.write_text(story.transcript().model_dump_json())
    assert read_agent_transcript(str(good), Path("/nonexistent")) == story.transcript()


def test_a_missing_schema_file_is_named_with_the_setting_to_fix_it(tmp_path: Path) -> None:
    """Without the committed schema nothing could be checked: say which file and setting."""
    with pytest.raises(RecorderError, match=r"nope\.json.*SREFORGE_RECORDER_SCHEMA_PATH"):
        RecordSchema(tmp_path / "nope.json")
