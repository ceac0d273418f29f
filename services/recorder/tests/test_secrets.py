"""No file of a run folder holds a harness secret, whatever path it came by.

The canary replays the incident: an agent's RCA, diff, transcript and kept files carrying
the bus operator's password and the trigger's webhook token, published by a client that
does not redact (so the recorder's own redaction is what is tested).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sreforge_bus import (
    MARKER,
    Bus,
    HarnessSecrets,
    bootstrap,
    connect,
)
from sreforge_bus.embedded import NatsServer
from sreforge_bus.testing import consumer_settled, engine_home, operator_password, poll
from sreforge_contracts import Event, Recorded, Submitted, parse_run_record
from sreforge_recorder import CONSUMER, RecorderSettings, recorder_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

TRIGGER_TOKEN = "trigger-token-0123456789abcdefghijKLMNOP"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh engine home: the bus users' credentials and the trigger's token file."""
    return engine_home(tmp_path / "home", TRIGGER_TOKEN)


@pytest.fixture
async def guarded_recorder(
    nats_server: NatsServer, bus: Bus, home: Path, settings: RecorderSettings
) -> AsyncIterator[None]:
    """The recorder on a connection guarding the home's secrets, as the engine wires it."""
    await bootstrap(bus, [CONSUMER])
    own = await connect(nats_server.url, name="recorder", secrets=HarnessSecrets.of_home(home))
    stop = asyncio.Event()
    task = asyncio.create_task(recorder_service(settings).run(own, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await own.close()


def leaking_submission(story: Any, agent: Path, password: str) -> Submitted:
    """A `Submitted` whose RCA and diff quote the secrets and whose kept files hold them."""
    (agent / "notes.md").write_text(f"found it: {password}\n")
    (agent / "blob.bin").write_bytes(b"\x00\xff" + TRIGGER_TOKEN.encode() + b"\x00")
    transcript = story.transcript().model_copy(update={"raw_text": f"cat -> {password}\n"})
    (agent / "agent-transcript.json").write_text(transcript.model_dump_json())
    event: Submitted = story.submitted(rca=f"the operator's password is {password}")
    submission = event.submission.model_copy(
        update={
            "diff": f"+PASSWORD = '{password}'\n+TOKEN = '{TRIGGER_TOKEN}'\n",
            "transcript_ref": "agent/agent-transcript.json",
            "agent_dir": str(agent),
            "agent_files": ("agent-transcript.json", "notes.md", "blob.bin"),
        }
    )
    return event.model_copy(update={"submission": submission})


def exists(path: Path) -> bool:
    """Whether `path` exists (a quick local stat, fine inside a test coroutine)."""
    return path.exists()


def files_under(*roots: Path) -> list[Path]:
    """Every regular file under `roots`."""
    return [path for root in roots for path in root.rglob("*") if path.is_file()]


async def test_a_secret_in_a_submission_reaches_no_file_of_the_run(
    bus: Bus,
    story: Any,
    settings: RecorderSettings,
    home: Path,
    tmp_path: Path,
    guarded_recorder: None,
    log_events: Callable[[], list[dict[str, Any]]],
) -> None:
    """Every file of the run folder and the bank is free of the password and the token;
    the marker stands where they were; the record's sha256 is the written file's."""
    password = operator_password(home)
    agent = tmp_path / "stack" / "agent"
    agent.mkdir(parents=True)
    events: list[Event] = story.happy()
    events[5] = leaking_submission(story, agent, password)
    run_dir = settings.runs_dir / story.run_id
    for event in events:
        await bus.publish(event)

    async def recorded() -> bool:
        return exists(run_dir / "record.json") and await consumer_settled(bus, "recorder")

    await poll(recorded, "the run recorded and every event acked", timeout=30)
    logs = log_events()

    written = files_under(run_dir, settings.store_dir, settings.records_root)
    assert {"events.jsonl", "record.json", "rca.txt", "diff.patch", "notes.md"} <= {
        path.name for path in written
    }
    for path in written:
        data = path.read_bytes()
        assert password.encode() not in data, f"the operator's password is in {path}"
        assert TRIGGER_TOKEN.encode() not in data, f"the trigger token is in {path}"
    for name in ("rca.txt", "diff.patch", "events.jsonl", "agent/notes.md", "agent/blob.bin"):
        assert MARKER.encode() in (run_dir / name).read_bytes(), name
    record = parse_run_record((run_dir / "record.json").read_text())
    assert record.agent_transcript is not None
    entry = await bus.runs.get(f"recorded.{story.run_id}")
    assert entry is not None
    assert Recorded.model_validate_json(entry.value).sha256 == record.sha256()
    warnings = [e for e in logs if e["event"].startswith("harness secret redacted")]
    assert warnings, "the redaction was not logged"
    assert password not in repr(logs)
