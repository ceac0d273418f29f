"""The recorder on a real bus: one record and one Recorded per run, whatever happens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from sreforge_bus import HEADER_MSG_ID, RECORDED, STREAM, Bus, Context, Delivery, Emit
from sreforge_bus.testing import consumer_settled, poll
from sreforge_contracts import Event, Recorded, parse_run_record
from sreforge_recorder import Recorder

pytestmark = pytest.mark.integration


async def publish_all(bus: Bus, events: list[Event]) -> None:
    """Publish each event (deduplicated by its event id)."""
    for event in events:
        await bus.publish(event)


async def stored_count(bus: Bus, subject: str) -> int:
    """How many messages the stream holds on exactly `subject`."""
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def settle(bus: Bus, record_path: Path) -> None:
    """Wait until the record exists and the recorder has acked everything."""

    async def done() -> bool:
        return exists(record_path) and await consumer_settled(bus, "recorder")

    await poll(done, f"{record_path} written and every event acked", timeout=20)


def exists(path: Path) -> bool:
    """Whether `path` exists (a quick local stat, fine inside a test coroutine)."""
    return path.exists()


def logged_event_ids(run_dir: Path) -> list[str]:
    """The event ids in events.jsonl, in file order."""
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["event"]["event_id"] for line in lines]


async def test_a_run_ends_in_one_record_and_one_recorded_event(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """Every event is logged; Scored writes a banked record and publishes Recorded once."""
    transcript = settings.runs_dir.parent / "agent-transcript.json"
    transcript.write_text(story.transcript().model_dump_json())
    events = [*story.happy(transcript_ref=str(transcript)), story.cleaned_up()]
    await start_recorder(settings)
    await publish_all(bus, events)
    run_dir = settings.runs_dir / story.run_id
    await settle(bus, run_dir / "record.json")
    await poll(
        lambda: _async(len(logged_event_ids(run_dir)) == len(events) + 1),
        "CleanedUp and Recorded logged",
    )
    record = parse_run_record((run_dir / "record.json").read_text())
    assert record.verdict == "passed"
    assert record.agent_transcript is not None
    recorded_subject = f"sreforge.run.{story.run_id}.Recorded"
    assert await stored_count(bus, recorded_subject) == 1
    recorded_entry = await bus.runs.get(f"recorded.{story.run_id}")
    assert recorded_entry is not None
    recorded = Recorded.model_validate_json(recorded_entry.value)
    assert recorded.sha256 == record.sha256()
    assert recorded.verdict == "passed"
    assert Path(recorded.path) == (run_dir / "record.json").resolve()
    logged = logged_event_ids(run_dir)
    assert logged[: len(events) - 1] == [e.event_id for e in events[:-1]]
    assert sorted(logged[len(events) - 1 :]) == sorted([recorded.event_id, events[-1].event_id])
    for name in ("diff.patch", "rca.txt", "agent-transcript.json", "transcript.txt"):
        assert (run_dir / name).exists(), name
    banking = json.loads((run_dir / "banking.json").read_text())
    assert banking["banked"] is True
    assert exists(Path(banking["pruned_path"]))


async def test_a_proof_run_is_recorded_labelled_and_not_banked(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """The record says proof run; Recorded and banking.json carry the refusal."""
    transcript = settings.runs_dir.parent / "agent-transcript.json"
    transcript.write_text(story.transcript().model_dump_json())
    await start_recorder(settings)
    await publish_all(bus, story.happy(transcript_ref=str(transcript), proof_run=True))
    run_dir = settings.runs_dir / story.run_id
    await settle(bus, run_dir / "record.json")
    record = parse_run_record((run_dir / "record.json").read_text())
    assert (record.verdict, record.proof_run) == ("passed", True)
    banking = json.loads((run_dir / "banking.json").read_text())
    assert banking["banked"] is False
    assert "proof run of an unverified profile" in banking["refusal"]
    recorded_entry = await bus.runs.get(f"recorded.{story.run_id}")
    assert recorded_entry is not None
    recorded = Recorded.model_validate_json(recorded_entry.value)
    assert recorded.banked is False
    assert recorded.bank_refusal == banking["refusal"]
    assert list(settings.records_root.rglob("*.json")) == []


async def test_duplicated_and_repeated_events_still_give_one_record(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """Republished events (new stream sequence, same event id) change nothing."""
    events = story.happy()
    await start_recorder(settings)
    await publish_all(bus, events)
    run_dir = settings.runs_dir / story.run_id
    await settle(bus, run_dir / "record.json")
    first = (run_dir / "record.json").read_bytes()
    banked_at = (run_dir / "banking.json").stat().st_mtime_ns
    for event in [*events, story.failed("ci", "late failure", "error", at=200)]:
        headers = {HEADER_MSG_ID: f"again.{event.event_id}"}  # past JetStream's dedupe
        await bus.publish_raw(event.subject, event.model_dump_json().encode(), headers)
    await poll(lambda: consumer_settled(bus, "recorder"), "duplicates acked", timeout=20)
    assert (run_dir / "record.json").read_bytes() == first
    assert (run_dir / "banking.json").stat().st_mtime_ns == banked_at, "the end was redone"
    assert await stored_count(bus, f"sreforge.run.{story.run_id}.Recorded") == 1
    ids = logged_event_ids(run_dir)
    assert len(ids) == len(set(ids)) == len(events) + 2  # + Recorded + the late RunFailed
    banking = json.loads((run_dir / "banking.json").read_text())
    assert banking["banked"] is False
    assert "agent_transcript" in banking["refusal"]


async def test_a_restarted_recorder_writes_exactly_one_record(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """Stopped mid-run, a new recorder on the same durable picks up where it left off."""
    events = story.happy()
    stop_first = await start_recorder(settings)
    await publish_all(bus, events[:5])
    run_dir = settings.runs_dir / story.run_id
    await poll(
        lambda: _async((run_dir / "events.jsonl").exists() and len(logged_event_ids(run_dir)) == 5),
        "the first five events logged",
    )
    await stop_first()
    await publish_all(bus, events[5:])
    await start_recorder(settings)
    await settle(bus, run_dir / "record.json")
    assert parse_run_record((run_dir / "record.json").read_text()).verdict == "passed"
    assert await stored_count(bus, f"sreforge.run.{story.run_id}.Recorded") == 1
    assert logged_event_ids(run_dir)[: len(events)] == [e.event_id for e in events]


async def test_a_failing_write_is_redelivered_and_the_record_is_complete(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """Handlers fail while the runs dir is unusable; redeliveries still log every event."""
    settings.runs_dir.parent.mkdir(parents=True, exist_ok=True)
    settings.runs_dir.write_text("not a directory")
    events = story.happy()
    await start_recorder(settings)
    await publish_all(bus, events)

    async def redelivering() -> bool:
        info = await bus.js.consumer_info(STREAM, "recorder")
        return bool(info.num_redelivered)

    await poll(redelivering, "a failed delivery being retried", timeout=20)
    settings.runs_dir.unlink()
    run_dir = settings.runs_dir / story.run_id
    await settle(bus, run_dir / "record.json")
    record = parse_run_record((run_dir / "record.json").read_text())
    assert record.verdict == "passed"
    assert record.ci is not None
    assert record.deploy is not None
    assert record.trigger is not None
    assert logged_event_ids(run_dir)[: len(events)] == [e.event_id for e in events]
    assert await stored_count(bus, f"sreforge.run.{story.run_id}.Recorded") == 1


async def test_a_run_failing_right_after_its_request_is_recorded_aborted(
    bus: Bus, story: Any, settings: Any, start_recorder: Any
) -> None:
    """Most events missing: the record is still written, aborted with the reason."""
    await start_recorder(settings)
    await publish_all(bus, [story.requested(), story.failed("stack", "no free ports", at=1)])
    run_dir = settings.runs_dir / story.run_id
    await settle(bus, run_dir / "record.json")
    record = parse_run_record((run_dir / "record.json").read_text())
    assert record.verdict == "aborted"
    assert record.abort_reason == "stack: no free ports"
    assert record.timings.stack == 1_000
    assert not (run_dir / "diff.patch").exists()


async def test_the_end_reads_back_events_not_yet_delivered(
    bus: Bus, story: Any, settings: Any
) -> None:
    """Events still awaiting (re)delivery are read off the stream, so the record is whole."""
    events = story.happy()
    published = [await bus.publish(event) for event in events]
    scored = events[-1]
    delivery = Delivery(
        subject=scored.subject, data=scored.model_dump_json().encode(), stream_seq=published[-1].seq
    )
    context = Context(bus=bus, delivery=delivery, log=structlog.get_logger("test"))
    handled = await Recorder(settings).handle(scored, context)
    assert isinstance(handled, Emit)
    assert [event.type for event in handled.events] == ["Recorded"]
    await context.emit(handled)
    assert await bus.runs.once(RECORDED, story.run_id).claimed()
    run_dir = settings.runs_dir / story.run_id
    record = parse_run_record((run_dir / "record.json").read_text())
    assert record.verdict == "passed"
    assert record.trigger is not None
    assert record.ci is not None
    assert logged_event_ids(run_dir) == [e.event_id for e in events]
    assert await stored_count(bus, f"sreforge.run.{story.run_id}.Recorded") == 1


async def _async(value: bool) -> bool:
    return value
