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
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sreforge_bus import BusError, HarnessSecrets, connect
from sreforge_contracts import (
    RUN_START_SUBJECT,
    Determinism,
    RunStart,
    RunStartReply,
    TopologyName,
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
from sreforge._run_follow import Follower, Interrupt
from sreforge._run_view import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    REJECTION_GRACE_S,
    Outcome,
    Progress,
    format_outcome,
    format_summary,
    outcome_json,
    run_deadline,
)
from sreforge._settings import EngineSettings

__all__ = ["Trial", "add_run_command", "engine_session", "run_command"]

_REPLY_TIMEOUT_S = 15.0
EXIT_INTERRUPTED = 130
"""`sreforge run` was stopped by SIGINT or SIGTERM (the run ended aborted, with its record)."""


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
    """Run the trials and return the exit code (the worst trial's; 130 when interrupted)."""
    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    trial = Trial(args.scenario, args.agent, args.time_scale, Progress(sys.stderr), args.topology)
    interrupt = Interrupt()
    try:
        outcomes = asyncio.run(
            _trials(settings, trial, args.trials, as_json=args.json, interrupt=interrupt)
        )
    except BusError as error:
        print(f"sreforge run: {error}", file=sys.stderr)
        return EXIT_ERROR
    except asyncio.CancelledError:  # a second SIGINT/SIGTERM: left without the record
        print("sreforge run: stopped again: left without waiting for the record", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.trials > 1:
        summary = format_summary(outcomes)
        print(json.dumps({"summary": summary}) if args.json else f"\n{summary}", flush=True)
    if interrupt.asked.is_set():
        return EXIT_INTERRUPTED
    return max((outcome.exit_code for outcome in outcomes), default=EXIT_INTERRUPTED)


async def _trials(
    settings: EngineSettings, trial: Trial, count: int, *, as_json: bool, interrupt: Interrupt
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    async with engine_session(settings, client="sreforge-run") as engine:
        # On the embedded engine a signal must not take the engine from under the run: it
        # ends the run (aborted, recorded, torn down) first. An engine elsewhere finishes
        # its runs whatever happens to this process, so there the signals stay as they are.
        handling = interrupt.installed() if engine.tasks else contextlib.nullcontext()
        with handling:
            for number in range(1, count + 1):
                if interrupt.asked.is_set():
                    break
                if count > 1:
                    print(f"trial {number}/{count}", file=sys.stderr, flush=True)
                outcome = await trial.run(engine, interrupt)
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
        secrets = HarnessSecrets.of_home(settings.home, settings.bus_dir)
        bus = await connect(
            url, name=client, credential=credential, secrets=secrets, connect_timeout=5.0
        )
        try:
            yield RunningEngine(bus)  # no tasks: the engine runs elsewhere
        finally:
            await bus.close()
        return
    from sreforge_recorder import RecorderSettings

    from sreforge.cli import SERVICE_NAMES

    print("no engine running: starting the embedded engine", file=sys.stderr, flush=True)
    wire_defaults(settings)
    # Nothing adopts this engine's stacks once it is gone (its bus store is temporary):
    # they die with it, however it ends (the deployer's warden).
    os.environ.setdefault("SREFORGE_DEPLOYER_STACKS_DIE_WITH_OWNER", "true")
    async with running_engine(settings, load_services(SERVICE_NAMES)) as engine:
        engine.records_dir = RecorderSettings().runs_dir
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

    async def run(self, engine: RunningEngine, interrupt: Interrupt | None = None) -> Outcome:
        """Submit the run and follow it until its record (or its deadline); an `interrupt`
        ends it (aborted, with its record) on the embedded engine."""
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
        follower = Follower(engine, reply.run_id, self.progress, deadline, interrupt)
        outcome = await follower.run()
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
