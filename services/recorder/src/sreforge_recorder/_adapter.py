"""The bus wiring of the recorder: one durable consumer on every run event.

Each event is logged to `runs/<run_id>/events.jsonl` (once per event id). The
first terminal event (Scored, RunFailed, RunRejected) copies the agent's kept
files into `runs/<run_id>/agent/`, writes the record, banks it, has the RCA judged beside
it (`_judging`) and publishes `Recorded` (the deployer's cleanup, which removes the
stack's copy, waits for it);
the KV key `recorded.<run_id>` then marks the run as announced, so redelivered or
duplicated terminal events change nothing. Beside the consumer, the service serves the
live dashboard (`_serve`) over the run folders and the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

import structlog
from sreforge_bus import (
    RECORDED,
    Bus,
    ConsumerSpec,
    Context,
    Emit,
    Handled,
    HarnessSecrets,
    Route,
    Service,
    misplaced,
    read_stored,
)
from sreforge_contracts import (
    RUN_EVENTS_SUBJECTS,
    AgentTranscript,
    ContractError,
    Event,
    Recorded,
    RunRecord,
    Submission,
    parse_event,
    run_events_filter,
    utcnow,
)

from sreforge_recorder._assemble import (
    assemble_record,
    is_terminal,
    submission_of,
    with_kept_files,
)
from sreforge_recorder._judging import Judging
from sreforge_recorder._redact import redact_folder, redacted
from sreforge_recorder._serve import serve_dashboard
from sreforge_recorder._settings import RecorderSettings
from sreforge_recorder._store import (
    RecordBank,
    RecordSchema,
    RunArtifacts,
    RunFolder,
    read_agent_transcript,
)
from sreforge_recorder._transcript import LoggedEvent

__all__ = ["CONSUMER", "PRODUCER", "SERVICE", "Recorder", "recorder_service"]

PRODUCER = "recorder"

CONSUMER = ConsumerSpec(
    "recorder", RUN_EVENTS_SUBJECTS, max_deliver=10, backoff=(0.5, 1, 2, 5, 10, 30)
)
"""Every run event; a generous redelivery budget, since the record is the run's last word."""

Log = structlog.stdlib.BoundLogger


class Recorder:
    """The recorder's handler. Settings are read from the environment on first use
    unless given, so importing the package has no side effects."""

    def __init__(self, settings: RecorderSettings | None = None) -> None:
        self._settings = settings
        self._schema: RecordSchema | None = None
        self._judging: Judging | None = None

    @property
    def settings(self) -> RecorderSettings:
        """The settings in force (read from `SREFORGE_RECORDER_*` on first use)."""
        if self._settings is None:
            self._settings = RecorderSettings()
        return self._settings

    @property
    def schema(self) -> RecordSchema:
        """The committed run-record.v1 schema, loaded once."""
        if self._schema is None:
            self._schema = RecordSchema(self.settings.schema_path)
        return self._schema

    @property
    def judging(self) -> Judging:
        """The RCA judge of recorded runs (scenarios found under `records_root`)."""
        if self._judging is None:
            self._judging = Judging(self.settings.records_root)
        return self._judging

    async def serve(self, bus: Bus, stop: asyncio.Event) -> None:
        """The service's task: the live dashboard until `stop`, then the judgements in flight."""
        try:
            await serve_dashboard(self.settings, bus, stop)
        finally:
            if self._judging is not None:
                await self._judging.drain()

    async def handle(self, event: Event, context: Context) -> Handled:
        """Log `event`; on the run's first terminal event, record and announce the run."""
        if event.run_id is None:
            context.log.warning("run event without run_id ignored", type=event.type)
            return ()
        run_id = event.run_id
        folder = RunFolder(self.settings.runs_dir, run_id)
        delivery = context.delivery
        event = redacted(event, context.bus.secrets, context.log, run_id=run_id)
        folder.add_event(LoggedEvent(delivery.stream_seq, delivery.subject, event))
        if not is_terminal(event):
            return ()
        announced = context.once(RECORDED, run_id)
        if await announced.claimed():
            return ()
        await self._backfill(folder, context, upto=delivery.stream_seq)
        recorded = self.record(folder, context.log, secrets=context.bus.secrets)

        async def mark() -> Sequence[Event]:
            # Only once Recorded is stored: a crash before it redelivers and records again.
            await announced.claim(recorded.model_dump_json().encode())
            return ()

        return Emit(events=[recorded], then=mark)

    def record(
        self, folder: RunFolder, log: Log, *, secrets: HarnessSecrets | None = None
    ) -> Recorded:
        """Write the run's record unless it exists, bank it, and describe it as `Recorded`.

        Nothing written carries one of `secrets` (the bus connection's: the engine home's).
        """
        secrets = secrets if secrets is not None else HarnessSecrets()
        record = folder.read_record() or self._write(folder, log, secrets)
        swept = folder.redact(lambda path: redact_folder(path, secrets))
        if swept:
            log.warning("harness secret redacted from run files", run_id=folder.run_id, files=swept)
        banked, refusal = self._bank(folder, record, log)
        if self.settings.judge:
            self.judging.start(folder.path, record.scenario_id, folder.run_id)
        return Recorded(
            run_id=folder.run_id,
            producer=PRODUCER,
            path=str(folder.record_path.resolve()),
            sha256=folder.record_sha256(),
            verdict=record.verdict,
            banked=banked,
            bank_refusal=refusal,
        )

    def _write(self, folder: RunFolder, log: Log, secrets: HarnessSecrets) -> RunRecord:
        """Assemble the record from the logged events and write it with its artifacts."""
        events = folder.events()
        submission = submission_of(events)
        kept = self._keep_agent_files(folder, submission, log)
        transcript = self._agent_transcript(folder, submission, log)
        if transcript is not None:
            transcript = redacted(transcript, secrets, log, run_id=folder.run_id)
        if transcript is not None and kept is not None:
            transcript = with_kept_files(transcript, kept)
        record = assemble_record(
            events,
            recorded_at=utcnow(),
            engine_version=self.settings.engine_version,
            agent_transcript=transcript,
        )
        record = redacted(record, secrets, log, run_id=folder.run_id)
        artifacts = RunArtifacts()
        if submission is not None:
            artifacts = RunArtifacts(
                diff=submission.diff, rca=submission.rca, agent_transcript=transcript
            )
        if folder.write_record(record, self.schema, artifacts):
            log.info("run recorded", run_id=folder.run_id, verdict=record.verdict)
            return record
        written = folder.read_record()  # another handler won the race: its record stands
        assert written is not None, "write_record saw a record, so one exists"
        return written

    def _keep_agent_files(
        self, folder: RunFolder, submission: Submission | None, log: Log
    ) -> list[str] | None:
        """Copy the agent's kept files into `runs/<id>/agent/` while the stack still
        holds them (its cleanup waits for `Recorded`); None when the runner named none."""
        if submission is None or submission.agent_dir is None:
            return None
        source = Path(submission.agent_dir)
        copied, refused = folder.keep_agent_files(source, submission.agent_files)
        if refused:
            log.warning("agent files not kept", run_id=folder.run_id, refused=refused[:20])
        return copied

    def _agent_transcript(
        self, folder: RunFolder, submission: Submission | None, log: Log
    ) -> AgentTranscript | None:
        if submission is None or submission.transcript_ref is None:
            return None
        try:
            return read_agent_transcript(submission.transcript_ref, folder.path)
        except ContractError as error:
            log.warning("agent transcript unreadable", run_id=folder.run_id, error=str(error))
            return None

    def _bank(self, folder: RunFolder, record: RunRecord, log: Log) -> tuple[bool, str | None]:
        """Bank the record when banking is on; say whether it was banked and why not."""
        settings = self.settings
        if not settings.bank:
            return False, None
        bank = RecordBank(settings.store_dir, settings.records_root)
        banking = bank.bank(record, self.schema, allow_unlabelled=settings.allow_unlabelled)
        folder.write_banking(banking)
        if banking.refusal is not None:
            # Expected for every built-in agent's run; the reason is in the Recorded event.
            log.info("not banked", run_id=folder.run_id, reason=banking.refusal)
        elif banking.pruned_path is None:
            log.info("no scenario folder for the pruned record", run_id=folder.run_id)
        return banking.banked, banking.refusal

    async def _backfill(self, folder: RunFolder, context: Context, *, upto: int) -> None:
        """Log any earlier event of the run still missing (e.g. awaiting redelivery).

        The stream is the source of truth: its stored events of this run up to the
        terminal one are read back, so the record never misses a delayed event.
        """
        if upto <= 0:
            return

        async def read() -> None:
            stored = read_stored(context.bus, run_events_filter(folder.run_id), upto=upto)
            async with contextlib.aclosing(stored):  # end the read now, not at garbage collection
                async for message in stored:
                    try:
                        event = parse_event(message.data)
                    except ContractError as error:
                        context.log.warning("unparsable run event skipped", error=str(error))
                    else:
                        if (wrong := misplaced(event, message.subject)) is not None:
                            context.log.warning("misplaced run event skipped", error=wrong)
                        else:
                            event = redacted(event, context.bus.secrets, context.log)
                            folder.add_event(LoggedEvent(message.seq, message.subject, event))
                    if message.seq >= upto:
                        return

        try:
            await asyncio.wait_for(read(), self.settings.backfill_timeout_seconds)
        except TimeoutError:
            context.log.warning("backfill timed out; recording what is logged", upto=upto)


def recorder_service(settings: RecorderSettings | None = None) -> Service:
    """The recorder as a bus `Service` (settings from the environment when None)."""
    recorder = Recorder(settings)
    routes = (Route(CONSUMER, recorder.handle, parse_event),)
    return Service(name="recorder", routes=routes, tasks=(recorder.serve,))


SERVICE = recorder_service()
"""What the engine runs: `await SERVICE.run(bus, stop)`."""
