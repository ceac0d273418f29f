"""`sreforge run <scenario> --agent <profile>`: start a run, show its phases, print the verdict.

With an engine up (`SREFORGE_NATS_URL`, or the `engine.json` that `sreforge up`
advertises) the command only submits `run.start` and follows the run's events.
Otherwise it runs the embedded engine in-process (its own nats-server in a temporary
store, every service) for the duration of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats.errors
from sreforge_bus import BusError, connect, follow, misplaced
from sreforge_contracts import (
    RUN_START_SUBJECT,
    CleanedUp,
    ContractError,
    Determinism,
    Event,
    Recorded,
    RunFailed,
    RunRejected,
    RunStart,
    RunStartReply,
    Scored,
    Submitted,
    TopologyName,
    parse_event,
)

from sreforge._engine import (
    RunningEngine,
    advertised_url,
    load_services,
    operator_credential,
    running_engine,
    wire_defaults,
)
from sreforge._logging import configure_logging
from sreforge._run_view import (
    CLEANUP_GRACE_S,
    EXIT_CODES_HELP,
    EXIT_ERROR,
    RECORD_GRACE_S,
    REJECTION_GRACE_S,
    Outcome,
    Progress,
    describe,
    format_outcome,
    format_summary,
    is_proof_run,
    outcome_json,
    run_deadline,
)
from sreforge._settings import EngineSettings

__all__ = ["Trial", "add_run_command", "engine_session", "run_command"]

_REPLY_TIMEOUT_S = 15.0


def add_run_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `run <scenario> --agent <profile> [--time-scale S] [--topology T] [--trials N]`."""
    run = verbs.add_parser(
        "run",
        help="run a scenario with an agent and print its verdict",
        description="Run an incident scenario end to end with an agent profile: live progress "
        "on stderr, then the verdict, the score per signal and the record path.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("scenario", help="scenario id, e.g. latency-cache-stampede")
    run.add_argument("--agent", required=True, help="agent profile: noop, reference, scripted, ...")
    run.add_argument(
        "--time-scale", type=_time_scale, default=1.0, metavar="S",
        help="0 < S <= 1: shrink every system duration (a smoke verdict below 1)",
    )  # fmt: skip
    run.add_argument(
        "--topology", choices=("local", "compose"), default=None,
        help="where the run's stack runs: local processes or a Compose project "
        "(default: what the scenario's stack declares, else local)",
    )  # fmt: skip
    run.add_argument("--trials", type=_positive, default=1, metavar="N", help="run N times in turn")
    run.add_argument("--json", action="store_true", help="one JSON object per trial on stdout")
    run.set_defaults(handler=run_command)


def _time_scale(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"time scale {text} is outside (0, 1]")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"trials must be >= 1, got {text}")
    return value


def run_command(args: argparse.Namespace) -> int:
    """Run the trials and return the exit code (the worst trial's)."""
    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    trial = Trial(args.scenario, args.agent, args.time_scale, Progress(sys.stderr), args.topology)
    try:
        outcomes = asyncio.run(_trials(settings, trial, args.trials, as_json=args.json))
    except BusError as error:
        print(f"sreforge run: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.trials > 1:
        summary = format_summary(outcomes)
        print(json.dumps({"summary": summary}) if args.json else f"\n{summary}", flush=True)
    return max(outcome.exit_code for outcome in outcomes)


async def _trials(
    settings: EngineSettings, trial: Trial, count: int, *, as_json: bool
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    async with engine_session(settings, client="sreforge-run") as engine:
        for number in range(1, count + 1):
            if count > 1:
                print(f"trial {number}/{count}", file=sys.stderr, flush=True)
            outcome = await trial.run(engine)
            outcomes.append(outcome)
            print(outcome_json(outcome) if as_json else format_outcome(outcome), flush=True)
    return outcomes


@contextlib.asynccontextmanager
async def engine_session(settings: EngineSettings, *, client: str) -> AsyncIterator[RunningEngine]:
    """The engine to submit runs to: the running one (`SREFORGE_NATS_URL`, or the one
    `sreforge up` advertises), joined as the operator named `client`; else the embedded
    engine, in this process for the block's duration."""
    url = settings.nats_url or advertised_url(settings)
    if url is not None:
        credential = operator_credential(settings)
        bus = await connect(url, name=client, credential=credential, connect_timeout=5.0)
        try:
            yield RunningEngine(bus)  # no tasks: the engine runs elsewhere
        finally:
            await bus.close()
        return
    from sreforge.cli import SERVICE_NAMES

    print("no engine running: starting the embedded engine", file=sys.stderr, flush=True)
    wire_defaults(settings)
    async with running_engine(settings, load_services(SERVICE_NAMES)) as engine:
        yield engine


@dataclass
class Trial:
    """One run of `scenario` by `agent`: submitted on `run.start`, followed to its record."""

    scenario: str
    agent: str
    time_scale: float
    progress: Progress
    topology: TopologyName | None = None
    """None: where the scenario's stack declares (else local)."""

    async def run(self, engine: RunningEngine) -> Outcome:
        """Submit the run and follow it until its record (or its deadline)."""
        self.progress.restart()
        request = RunStart(
            scenario=self.scenario,
            agent=self.agent,
            time_scale=self.time_scale,
            topology=self.topology,
        )
        try:
            answer = await engine.bus.command(RUN_START_SUBJECT, request, _REPLY_TIMEOUT_S)
            reply = RunStartReply.model_validate_json(answer)
        except BusError as error:
            return Outcome(None, "error", reason=f"run.start got no answer: {error}")
        if reply.run_id is None:
            return Outcome(None, "rejected", reason=reply.error)
        deadline = REJECTION_GRACE_S if not reply.accepted else self._deadline()
        outcome = await _Follower(engine, reply.run_id, self.progress, deadline).run()
        self.progress.done()
        if not reply.accepted:  # the record (if any) says aborted; the command was refused
            return Outcome(reply.run_id, "rejected", reason=reply.error, record=outcome.record)
        return dataclasses.replace(outcome, time_scale=self.time_scale)

    def _deadline(self) -> float:
        from sreforge_correlator import CorrelatorSettings, ScenarioCatalog, StartRejected

        settings = CorrelatorSettings()
        try:
            determinism = ScenarioCatalog(settings.use_cases).manifest(self.scenario).determinism
        except StartRejected:
            determinism = Determinism()  # the engine may see scenarios this shell does not
        return run_deadline(determinism, self.time_scale, settings.agent_budget_seconds)


FOLLOW_RETRIES = 4
"""How often a run's follow is taken up again after it was cut short (0.5 s, 1 s, 2 s, 4 s
apart: about what a 3-node cluster takes to elect new leaders after losing one)."""


class _Follower:
    """Reads one run's events until its record, or until the run's deadline (extended by a
    grace period when the verdict comes late) with the verdict alone."""

    def __init__(
        self, engine: RunningEngine, run_id: str, progress: Progress, deadline_s: float
    ) -> None:
        self._engine = engine
        self._run_id = run_id
        self._progress = progress
        self._deadline = time.monotonic() + deadline_s
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._verdict: Event | None = None
        self._recorded: Recorded | None = None
        self._proof_run = False
        self._submitted: Submitted | None = None

    async def run(self) -> Outcome:
        reader = asyncio.create_task(self._read())
        try:
            return await self._watch(reader)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _read(self) -> None:
        """Follow the run's subjects; a follow cut short (a cluster node lost, the consumer's
        creation timing out meanwhile) is taken up again from the start, skipping what was
        read, `FOLLOW_RETRIES` times."""
        read = 0
        for attempt in range(FOLLOW_RETRIES + 1):
            try:
                async for message in follow(self._engine.bus, f"sreforge.run.{self._run_id}.>"):
                    if message.seq <= read:
                        continue
                    read = message.seq
                    self._take(message.subject, message.data)
                return
            except (TimeoutError, nats.errors.Error):
                if attempt == FOLLOW_RETRIES or time.monotonic() > self._deadline:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)  # let the cluster elect its leaders

    def _take(self, subject: str, data: bytes) -> None:
        with contextlib.suppress(ContractError):
            event = parse_event(data)
            if misplaced(event, subject) is None:  # a forged body on another's subject
                self._events.put_nowait(event)

    async def _watch(self, reader: asyncio.Task[None]) -> Outcome:
        while (left := self._deadline - time.monotonic()) > 0:
            try:
                event = await asyncio.wait_for(self._events.get(), min(left, self._progress.tick_s))
            except TimeoutError:
                if crash := self._engine.crashed() or _lost(reader):
                    return Outcome(self._run_id, "error", reason=crash)
                self._progress.wait()
                continue
            if (shown := describe(event)) is not None:
                self._progress.phase(*shown)
            self._proof_run = self._proof_run or is_proof_run(event)
            if isinstance(event, Submitted) and self._submitted is None:
                self._submitted = event
            if isinstance(event, CleanedUp) and self._recorded is not None:
                return self._ended(self._recorded.verdict, self._recorded.path)
            if isinstance(event, Recorded) and self._recorded is None:
                self._recorded = event  # the record stands; wait briefly for the teardown
                self._deadline = min(self._deadline, time.monotonic() + CLEANUP_GRACE_S)
            if isinstance(event, Scored | RunFailed | RunRejected) and self._verdict is None:
                self._verdict = event
                # The record follows the verdict, late when the recorder restarts: wait for
                # it until the run's own deadline (at least RECORD_GRACE_S more).
                self._deadline = max(self._deadline, time.monotonic() + RECORD_GRACE_S)
        if self._recorded is not None:
            return self._ended(self._recorded.verdict, self._recorded.path)
        if self._verdict is not None:
            return self._ended(None, None)
        return Outcome(
            self._run_id, "error", reason=f"no verdict before the deadline (last phase: "
            f"{self._progress.last_phase}); see `sreforge tail --run {self._run_id}`",
        )  # fmt: skip

    def _ended(self, verdict: str | None, record: str | None) -> Outcome:
        found = self._verdict
        score = found.score if isinstance(found, Scored) else None
        reason = None
        if isinstance(found, RunFailed):
            reason = f"{found.stage}: {found.reason}"
        elif isinstance(found, RunRejected):
            reason = found.reason
        if verdict is None:
            verdict = found.verdict if isinstance(found, Scored | RunFailed) else "aborted"
        submission = self._submitted.submission if self._submitted else None
        return Outcome(
            self._run_id,
            verdict,
            reason=reason,
            score=score,
            record=record,
            proof_run=self._proof_run,
            submitted=submission.submitted if submission else None,
            agent_exit=submission.agent_exit if submission else None,
        )


def _lost(reader: asyncio.Task[None]) -> str | None:
    if not reader.done():
        return None
    error = None if reader.cancelled() else reader.exception()
    return f"lost the run's event stream: {error!r}"
