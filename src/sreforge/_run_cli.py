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
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from sreforge_bus import BusError, connect, follow
from sreforge_contracts import (
    RUN_START_SUBJECT,
    BriefReady,
    CiResult,
    ContractError,
    Deployed,
    Determinism,
    Event,
    FaultArmed,
    OracleScore,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunStart,
    RunStartReply,
    RunTriggered,
    Scored,
    StackReady,
    Submitted,
    parse_event,
)

from sreforge._engine import (
    RunningEngine,
    advertised_url,
    load_services,
    running_engine,
    wire_defaults,
)
from sreforge._logging import configure_logging
from sreforge._settings import EngineSettings

__all__ = [
    "EXIT_ABORTED",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_PASSED",
    "Outcome",
    "add_run_command",
    "describe",
    "exit_code",
    "format_outcome",
    "format_progress",
    "format_summary",
    "run_deadline",
]

EXIT_PASSED, EXIT_FAILED, EXIT_ABORTED, EXIT_ERROR = 0, 1, 3, 4
_EXIT_BY_VERDICT = {
    "passed": EXIT_PASSED,
    "failed": EXIT_FAILED,
    "rejected": EXIT_FAILED,
    "aborted": EXIT_ABORTED,
    "error": EXIT_ERROR,
}
EXIT_CODES_HELP = """\
exit codes:
  0  passed
  1  failed, or rejected (by the CI gate, or run.start refused)
  3  aborted (setup failed, or the alert never fired: confirm-fire)
  4  error (an engine error, or no verdict before the run's deadline)
  with --trials N, the worst of the trials' codes
"""
# Allowances for the unscaled parts of a run when deriving its overall deadline.
_STACK_BOOT_S = 180.0
_CI_AND_DEPLOY_S = 600.0
_RECORD_GRACE_S = 30.0
_REJECTION_GRACE_S = 10.0
_REPLY_TIMEOUT_S = 15.0
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def add_run_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `run <scenario> --agent <profile> [--time-scale S] [--trials N] [--json]`."""
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


@dataclass(frozen=True)
class Outcome:
    """How one trial ended."""

    run_id: str | None
    verdict: str
    reason: str | None = None
    score: OracleScore | None = None
    record: str | None = None

    @property
    def exit_code(self) -> int:
        """The process exit code this outcome stands for."""
        return exit_code(self.verdict)


def exit_code(verdict: str) -> int:
    """0 passed, 1 failed/rejected, 3 aborted, 4 error (and anything unknown)."""
    return _EXIT_BY_VERDICT.get(verdict, EXIT_ERROR)


def run_deadline(determinism: Determinism, time_scale: float, agent_budget_s: float) -> float:
    """Seconds after which a run with no verdict is given up on: never hang forever."""
    windows = determinism.scaled(time_scale)
    system = (
        windows.confirm_fire_timeout_seconds
        + windows.max_clear_time_seconds
        + windows.sustained_clear_seconds
    )
    return _STACK_BOOT_S + system + agent_budget_s + _CI_AND_DEPLOY_S + _RECORD_GRACE_S


def describe(event: Event) -> tuple[str, str] | None:
    """The phase an event marks and a one-line detail, or None for events that are no phase."""
    if isinstance(event, RunRequested):
        scale = f"time scale {event.time_scale:g}"
        return "requested", f"{event.scenario}, agent {event.agent}, {scale}"
    if isinstance(event, RunRejected):
        return "rejected", event.reason
    if isinstance(event, StackReady):
        return "stack ready", event.stack
    if isinstance(event, FaultArmed):
        return "armed", "fault delivered, load running; waiting for the alert"
    if isinstance(event, RunTriggered):
        return "triggered", f"{event.trigger.alert_name} fired"
    if isinstance(event, BriefReady):
        return "briefed", "the agent has the page"
    if isinstance(event, Submitted):
        return "submitted", _submission(event)
    if isinstance(event, CiResult):
        return "ci", f"{'green' if event.green else 'red'} in {event.duration_ms / 1000:.1f}s"
    if isinstance(event, Deployed):
        return "deployed", _deployment(event)
    if isinstance(event, Scored):
        return "scored", f"{event.verdict}, score {event.score.score:.2f}"
    if isinstance(event, RunFailed):
        return "failed", f"{event.stage}: {event.reason} ({event.verdict})"
    if isinstance(event, Recorded):
        return "recorded", event.path
    return None


def _submission(event: Submitted) -> str:
    found = event.submission
    if not found.submitted:
        return f"no submission ({found.stop_reason or 'agent stopped'})"
    return f"{len(found.diff.splitlines())} diff lines in {found.duration_ms / 1000:.1f}s"


def _deployment(event: Deployed) -> str:
    if not event.redeployed:
        return f"{event.service} redeploy failed: {event.error or 'no reason given'}"
    return f"{event.service} redeployed (readiness {event.readiness})"


def format_progress(elapsed_s: float, phase: str, detail: str) -> str:
    """One progress line: `  12.3s  triggered    BookshelfApiLatencyP99High fired`."""
    return f"{elapsed_s:7.1f}s  {phase:<12} {detail}".rstrip()


def format_outcome(outcome: Outcome) -> str:
    """The verdict, the score with one line per signal, and the record path."""
    lines = [f"verdict: {outcome.verdict}" + (f" (run {outcome.run_id})" if outcome.run_id else "")]
    if outcome.reason:
        lines.append(f"reason:  {outcome.reason}")
    if outcome.score is not None:
        lines.append(f"score:   {outcome.score.score:.2f}")
        for signal in outcome.score.signals:
            mark = "✓" if signal.satisfied else "✗"
            detail = f"  {signal.detail}" if signal.detail else ""
            weight = f"weight {signal.weight:.2f}"
            lines.append(f"  {mark} {signal.id:<16} {signal.value:4.2f}  {weight}{detail}")
    lines.append(f"record:  {outcome.record or '(none written)'}")
    return "\n".join(lines)


def format_summary(outcomes: Sequence[Outcome]) -> str:
    """`N trials: passed 2, failed 1; pass rate 67%; mean score 0.81 ± 0.05 (std. error)`."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.verdict] = counts.get(outcome.verdict, 0) + 1
    tally = ", ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items()))
    rate = 100 * counts.get("passed", 0) / len(outcomes)
    text = f"{len(outcomes)} trials: {tally}; pass rate {rate:.0f}%"
    scores = [o.score.score for o in outcomes if o.score is not None]
    if scores:
        mean = sum(scores) / len(scores)
        spread = sum((s - mean) ** 2 for s in scores) / max(len(scores) - 1, 1)
        text += f"; mean score {mean:.2f} ± {(spread / len(scores)) ** 0.5:.2f} (std. error)"
    return text


def _outcome_json(outcome: Outcome) -> str:
    payload: dict[str, Any] = {
        "run_id": outcome.run_id,
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "reason": outcome.reason,
        "score": outcome.score.model_dump(mode="json") if outcome.score else None,
        "record": outcome.record,
    }
    return json.dumps(payload)


class Progress:
    """Phase lines on stderr with the elapsed time; a spinner line while waiting on a TTY."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._start = time.monotonic()
        self._ticks = 0
        self.last_phase = "submitting"

    @property
    def tick_s(self) -> float:
        """How often the waiting line is redrawn (and the engine checked)."""
        return 0.1 if self._tty else 0.5

    def restart(self) -> None:
        """Measure elapsed time from now (a new trial)."""
        self._start = time.monotonic()
        self.last_phase = "submitting"

    def phase(self, phase: str, detail: str) -> None:
        """Print a phase line."""
        self.last_phase = phase
        self._write(format_progress(time.monotonic() - self._start, phase, detail) + "\n")

    def done(self) -> None:
        """Clear the spinner line before the verdict is printed."""
        if self._tty:
            self._write("", newline=False)

    def wait(self) -> None:
        """Redraw the spinner line (TTY only)."""
        if self._tty:
            self._ticks += 1
            spin = _SPINNER[self._ticks % len(_SPINNER)]
            elapsed = time.monotonic() - self._start
            self._write(f"{elapsed:7.1f}s  {spin} {self.last_phase} …", newline=False)

    def _write(self, text: str, newline: bool = True) -> None:
        prefix = "\r\x1b[2K" if self._tty else ""
        self._stream.write(prefix + text)
        self._stream.flush()


def run_command(args: argparse.Namespace) -> int:
    """Run the trials and return the exit code (the worst trial's)."""
    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    trial = _Trial(args.scenario, args.agent, args.time_scale, Progress(sys.stderr))
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
    settings: EngineSettings, trial: _Trial, count: int, *, as_json: bool
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    async with _engine(settings) as engine:
        for number in range(1, count + 1):
            if count > 1:
                print(f"trial {number}/{count}", file=sys.stderr, flush=True)
            outcome = await trial.run(engine)
            outcomes.append(outcome)
            print(_outcome_json(outcome) if as_json else format_outcome(outcome), flush=True)
    return outcomes


@contextlib.asynccontextmanager
async def _engine(settings: EngineSettings) -> AsyncIterator[RunningEngine]:
    url = settings.nats_url or advertised_url(settings)
    if url is not None:
        bus = await connect(url, name="sreforge-run", connect_timeout=5.0)
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
class _Trial:
    scenario: str
    agent: str
    time_scale: float
    progress: Progress

    async def run(self, engine: RunningEngine) -> Outcome:
        self.progress.restart()
        request = RunStart(scenario=self.scenario, agent=self.agent, time_scale=self.time_scale)
        try:
            answer = await engine.bus.command(RUN_START_SUBJECT, request, _REPLY_TIMEOUT_S)
            reply = RunStartReply.model_validate_json(answer)
        except BusError as error:
            return Outcome(None, "error", reason=f"run.start got no answer: {error}")
        if reply.run_id is None:
            return Outcome(None, "rejected", reason=reply.error)
        deadline = _REJECTION_GRACE_S if not reply.accepted else self._deadline()
        outcome = await _Follower(engine, reply.run_id, self.progress, deadline).run()
        self.progress.done()
        if not reply.accepted:  # the record (if any) says aborted; the command was refused
            return Outcome(reply.run_id, "rejected", reason=reply.error, record=outcome.record)
        return outcome

    def _deadline(self) -> float:
        from sreforge_correlator import CorrelatorSettings, ScenarioCatalog, StartRejected

        settings = CorrelatorSettings()
        try:
            determinism = ScenarioCatalog(settings.use_cases).manifest(self.scenario).determinism
        except StartRejected:
            determinism = Determinism()  # the engine may see scenarios this shell does not
        return run_deadline(determinism, self.time_scale, settings.agent_budget_seconds)


class _Follower:
    """Reads one run's events until its record (or its verdict and a grace period)."""

    def __init__(
        self, engine: RunningEngine, run_id: str, progress: Progress, deadline_s: float
    ) -> None:
        self._engine = engine
        self._run_id = run_id
        self._progress = progress
        self._deadline = time.monotonic() + deadline_s
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._verdict: Event | None = None

    async def run(self) -> Outcome:
        reader = asyncio.create_task(self._read())
        try:
            return await self._watch(reader)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _read(self) -> None:
        async for message in follow(self._engine.bus, f"sreforge.run.{self._run_id}.>"):
            with contextlib.suppress(ContractError):
                self._events.put_nowait(parse_event(message.data))

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
            if isinstance(event, Recorded):
                return self._ended(event.verdict, event.path)
            if isinstance(event, Scored | RunFailed | RunRejected) and self._verdict is None:
                self._verdict = event
                self._deadline = min(self._deadline, time.monotonic() + _RECORD_GRACE_S)
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
        return Outcome(self._run_id, verdict, reason=reason, score=score, record=record)


def _lost(reader: asyncio.Task[None]) -> str | None:
    if not reader.done():
        return None
    error = None if reader.cancelled() else reader.exception()
    return f"lost the run's event stream: {error!r}"
