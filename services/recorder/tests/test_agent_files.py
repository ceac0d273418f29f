"""The agent's kept files reach `runs/<id>/agent/` before the stack's cleanup removes them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import structlog
from sreforge_contracts import AgentExit, AgentTranscript, Submitted, parse_run_record
from sreforge_recorder import Recorder, RecorderSettings, RunFolder

LISTED = ("model-calls.jsonl", "stream.jsonl", "native/.claude/projects/p/s.jsonl", "gone.log")


def _agent_dir(root: Path, story: Any) -> Path:
    """A runner's agent folder as `end_session` leaves it, plus what a hostile name or a
    symlink would try to pull in."""
    agent = root / "stack" / "agent"
    (agent / "native" / ".claude" / "projects" / "p").mkdir(parents=True)
    (agent / "model-calls.jsonl").write_text('{"call": 1, "status": 401}\n')
    (agent / "stream.jsonl").write_text('{"stream": "stderr", "text": "boom"}\n')
    (agent / "native" / ".claude" / "projects" / "p" / "s.jsonl").write_text('{"turn": 1}\n')
    (root / "outside.txt").write_text("host file\n")
    (agent / "link.txt").symlink_to(root / "outside.txt")
    files = [{"path": f"agent/{name}", "bytes": 1} for name in LISTED]
    transcript = story.transcript().model_copy(
        update={"raw_text": None, "raw_json": {"format": "sreforge-stream.v1", "files": files}}
    )
    (agent / "agent-transcript.json").write_text(transcript.model_dump_json())
    return agent


def _submitted(story: Any, agent: Path, names: tuple[str, ...]) -> Submitted:
    event: Submitted = story.submitted()
    ended = AgentExit(exit_code=2, stderr_tail=("fatal: boom",), stderr_lines=1)
    submission = event.submission.model_copy(
        update={
            "submitted": False,
            "transcript_ref": "agent/agent-transcript.json",
            "agent_dir": str(agent),
            "agent_files": names,
            "agent_exit": ended,
        }
    )
    return event.model_copy(update={"submission": submission})


def test_the_agent_folder_is_copied_and_outlives_the_stack(
    story: Any, settings: RecorderSettings, tmp_path: Path
) -> None:
    """The runner's named files are copied into `runs/<id>/agent/` when the record is
    written; the transcript is read from there (its relative ref) and lists only what was
    kept; a symlink, an absolute path, a `..` path and a vanished file are refused; the
    record carries the agent's exit code and stderr tail, its pruned copy no stderr."""
    agent = _agent_dir(tmp_path, story)
    hostile = ("link.txt", "/etc/passwd", "../outside.txt", "native/../../outside.txt")
    names = ("agent-transcript.json", *LISTED, *hostile)
    events = [*story.happy()[:5], _submitted(story, agent, names), story.scored(passed=False)]
    folder = RunFolder(settings.runs_dir, story.run_id)
    for logged in story.logged(events):
        folder.add_event(logged)
    recorded = Recorder(settings).record(folder, structlog.get_logger("test"))
    shutil.rmtree(tmp_path / "stack")  # the deployer's cleanup, after Recorded

    kept = folder.path / "agent"
    found = sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file())
    assert found == sorted(["agent-transcript.json", *LISTED[:3]])
    assert not list(folder.path.rglob("outside.txt")), "a host file came in"
    assert recorded.verdict == "failed"
    record = parse_run_record((folder.path / "record.json").read_text())
    assert isinstance(record.agent_transcript, AgentTranscript)
    raw = record.agent_transcript.raw_json
    assert isinstance(raw, dict)
    assert [entry["path"] for entry in raw["files"]] == [f"agent/{n}" for n in LISTED[:3]]
    assert raw["files_lost"] == 1
    for entry in raw["files"]:
        assert (folder.path / entry["path"]).is_file(), entry
    top = json.loads((folder.path / "agent-transcript.json").read_text())
    assert top["raw_json"]["files"] == raw["files"]
    ended = record.trajectory.agent_exit
    assert ended is not None
    assert (ended.exit_code, ended.stderr_tail) == (2, ("fatal: boom",))
    pruned = record.pruned().trajectory.agent_exit
    assert pruned is not None
    assert (pruned.exit_code, pruned.stderr_tail, pruned.stderr_lines) == (2, (), 1)


def test_a_runner_elsewhere_leaves_the_record_without_agent_files(
    story: Any, settings: RecorderSettings, tmp_path: Path
) -> None:
    """An agent folder the recorder cannot read (a runner on another host) costs the
    copies and the transcript, never the record."""
    events = [
        *story.happy()[:5],
        _submitted(story, tmp_path / "elsewhere" / "agent", ("stream.jsonl",)),
        story.scored(passed=False),
    ]
    folder = RunFolder(settings.runs_dir, story.run_id)
    for logged in story.logged(events):
        folder.add_event(logged)
    Recorder(settings).record(folder, structlog.get_logger("test"))
    record = parse_run_record((folder.path / "record.json").read_text())
    assert record.agent_transcript is None
    assert not (folder.path / "agent").exists()
    assert record.trajectory.agent_exit is not None


@pytest.mark.timeout(10)
def test_kept_files_are_copied_through_no_link_and_never_from_a_fifo(
    story: Any, settings: RecorderSettings, tmp_path: Path
) -> None:
    """A linked folder on the way, a link, a FIFO and a device in the agent folder are
    refused with the reason, at once; the plain file beside them is copied."""
    agent = tmp_path / "agent"
    (agent / "native").mkdir(parents=True)
    (agent / "stream.jsonl").write_text("{}\n")
    secret = tmp_path / "engine-home" / "operator.json"
    secret.parent.mkdir()
    secret.write_text("OPERATOR-SEED-VALUE")
    (agent / "native" / "home").symlink_to(secret.parent)
    os.mkfifo(agent / "pipe.log")
    (agent / "zero.log").symlink_to("/dev/zero")
    names = ("stream.jsonl", "native/home/operator.json", "pipe.log", "zero.log")
    folder = RunFolder(settings.runs_dir, story.run_id)
    copied, refused = folder.keep_agent_files(agent, names)
    assert copied == ["stream.jsonl"]
    assert refused == [
        "native/home/operator.json: home is a symbolic link",
        "pipe.log: not a regular file (a FIFO)",
        "zero.log: zero.log is a symbolic link",
    ]
    assert not list(folder.path.rglob("operator.json"))
