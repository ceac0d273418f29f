"""How `sreforge tail` renders bus messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sreforge._tail import format_event_json, format_event_line

_AT = datetime(2026, 11, 29, 8, 0, 1, 250000, tzinfo=UTC)


def test_event_line_shows_time_run_type_and_body_fields() -> None:
    """An operator reads one line per event: when, which run, what happened, key facts."""
    data = json.dumps(
        {
            "event_id": "r-1.CiResult",
            "type": "CiResult",
            "run_id": "r-1",
            "producer": "deployer",
            "green": False,
            "exit_code": 1,
        }
    ).encode()
    line = format_event_line("sreforge.run.r-1.CiResult", data, _AT)
    assert line.startswith("08:00:01.250  r-1")
    assert "CiResult" in line
    assert "green=False exit_code=1" in line
    assert "producer" not in line


def test_unparsable_message_is_shown_raw_with_its_subject() -> None:
    """A malformed message on the bus is still visible, never dropped from the tail."""
    line = format_event_line("sreforge.run.start", b"{not json", _AT)
    assert "(unparsed)" in line
    assert "sreforge.run.start" in line
    assert "{not json" in line


def test_long_summaries_are_cut_to_one_line() -> None:
    """A huge diff in an event does not flood the terminal."""
    data = json.dumps({"type": "Submitted", "run_id": "r-2", "diff": "x" * 5000}).encode()
    line = format_event_line("sreforge.run.r-2.Submitted", data, _AT)
    assert len(line) < 260
    assert line.endswith("…")


def test_json_mode_carries_subject_seq_and_event() -> None:
    """`--json` output is machine-readable and keeps the raw text of malformed messages."""
    good = json.loads(format_event_json("sreforge.run.r-1.Scored", b'{"type": "Scored"}', 7))
    assert good == {"subject": "sreforge.run.r-1.Scored", "seq": 7, "event": {"type": "Scored"}}
    bad = json.loads(format_event_json("sreforge.run.start", b"oops", 8))
    assert bad["raw"] == "oops"


def test_a_deeply_nested_message_is_shown_raw_not_a_crash() -> None:
    """`sreforge tail` decoded with json.loads, which recursed until RecursionError."""
    data = b"[" * 100_000 + b"]" * 100_000
    line = format_event_line("sreforge.run.r1.Weird", data, _AT)
    assert "sreforge.run.r1.Weird" in line
    assert json.loads(format_event_json("sreforge.run.r1.Weird", data, 7))["raw"].startswith("[[")
