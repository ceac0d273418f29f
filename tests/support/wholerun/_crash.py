"""The crash-safety campaign: services SIGKILLed (or the nats-server downed) at run phases.

A `Plan` is one run on its own multi-process topology (`_services.Services`) and the
faults it suffers, in phase order: each waits for its phase (`PHASES`: a fact read from
the stream, a service's log or its process tree), strikes, and the run goes on. Plans
run side by side (`campaign`), so the whole matrix costs about one run's wall time.
`Hit.landed` says whether the phase still held when the fault struck (the event that
ends it came later); `Hit.back_s` how long after the fault that event came.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sreforge_bus import Bus, connect
from sreforge_contracts import TriggerFired
from sreforge_oracle import RunJournal

from ._pool import REPO, RUN_LIMIT_S, SCENARIO, SCENARIO_PARTS, TIME_SCALE, Run, kill_session
from ._services import Services, StreamWatch, descendants, services_for, until

NATS_DOWN_S = 5.0
"""How long a nats-server outage lasts (the fault itself, not a wait for anything)."""
GRADING_SAMPLES = 3  # saved samples before the kill: grading is under way
SLOW_AGENT = "scripted:slow-fix"
"""The reference fix applied after a few seconds' work: an agent phase a fault can hit."""
SLOW_AGENT_WORK_S = 25
"""Longer than a killed runner takes to come back and get the BriefReady again (loaded)."""


@dataclass(frozen=True)
class Fault:
    """One service (or `nats`) struck at one phase of the run."""

    target: str
    phase: str
    frozen_from: str | None = None
    """A phase from whose start the target is frozen (SIGSTOP) until the strike: for a
    phase too short to hit otherwise (the correlator's turn of a TriggerFired takes
    milliseconds), so the strike lands in it rather than just after."""
    holding: str | None = None
    """The service frozen from `frozen_from` instead of the target, and thawed (SIGCONT)
    right after the strike: for a phase another service's short turn ends (the context's
    page → brief, while the runner is struck), so it is still open when the strike lands."""

    @property
    def name(self) -> str:
        """`<target>@<phase>`, the case's name."""
        return f"{self.target}@{self.phase}"


@dataclass(frozen=True)
class Plan:
    """One run (its name, its agent) and the faults it suffers, in phase order."""

    name: str
    agent: str
    faults: tuple[Fault, ...]


@dataclass(frozen=True)
class Hit:
    """A fault as it struck: when, and when the event that ends its phase came."""

    fault: Fault
    at: datetime
    ended_at: datetime | None

    @property
    def landed(self) -> bool:
        """The phase still held when the fault struck."""
        return self.ended_at is None or self.ended_at > self.at

    @property
    def back_s(self) -> float | None:
        """Seconds from the fault to the event that ends its phase."""
        return None if self.ended_at is None else (self.ended_at - self.at).total_seconds()


@dataclass
class Outcome:
    """A plan's run once it is over: what the CLI printed, what the stream and the
    services showed, which faults struck."""

    plan: Plan
    run: Run
    hits: list[Hit] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    redeployed: bool = False
    events: list[tuple[str, datetime]] = field(default_factory=list)
    """Every event of the run, its type and when it occurred, in stream order."""
    alert_delay_s: float | None = None
    """From the alert firing at its source (`fired_at`) to the trigger publishing it (the
    first TriggerFired's `occurred_at`)."""
    logs: dict[str, str] = field(default_factory=dict)
    stop_codes: dict[str, int | None] = field(default_factory=dict)
    outlived: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class _Live:
    """What a phase check reads: the services, the stream, the CLI, the run's journal."""

    services: Services
    watch: StreamWatch
    bus: Bus
    cli: asyncio.subprocess.Process

    def seen(self, kind: str) -> bool:
        return bool(self.watch.of_type(kind))

    async def samples(self) -> int:
        deployed = self.watch.of_type("Deployed")
        if not deployed or deployed[0].run_id is None:
            return 0
        return len(await RunJournal(self.bus.runs, deployed[0].run_id).samples())


def _under(service: str) -> Callable[[_Live], bool]:
    def check(live: _Live) -> bool:
        return bool(descendants(live.services.current(service).pid))

    return check


def _agent_working(live: _Live) -> bool:
    return live.seen("BriefReady") and '"agent.start"' in live.services.text("runner")


def _alert_firing(live: _Live) -> bool:
    """The run's Prometheus fires an alert: its page reaches the trigger within the
    (scaled) group wait."""
    (ready,) = live.watch.of_type("StackReady")[:1] or (None,)
    prometheus = getattr(ready, "operator_endpoints", {}).get("prometheus")
    if prometheus is None:
        return False
    try:
        answer = httpx.get(f"{prometheus}/api/v1/alerts", timeout=1.0).json()
    except (httpx.HTTPError, ValueError):
        return False
    return any(alert.get("state") == "firing" for alert in answer["data"]["alerts"])


def _ci_testing(live: _Live) -> bool:
    return any("pytest" in line for line in descendants(live.services.current("deployer").pid))


_Check = Callable[[_Live], bool]
PHASES: dict[str, tuple[str, str, _Check | None]] = {
    # phase: (the event that starts it, the one that ends it, what else must hold)
    "boot": ("RunRequested", "StackReady", _under("deployer")),
    "arm": ("StackReady", "FaultArmed", None),
    "alerting": ("StackReady", "TriggerFired", None),  # the alert pending, then firing
    "firing": ("FaultArmed", "TriggerFired", _alert_firing),  # its page on its way
    "fired": ("TriggerFired", "RunTriggered", None),
    "triggered": ("RunTriggered", "BriefReady", None),
    "agent": ("BriefReady", "Submitted", _agent_working),
    "ci": ("Submitted", "CiResult", _ci_testing),
    "redeploy": ("CiResult", "Deployed", None),
    "deployed": ("Deployed", "Scored", None),
    "grading": ("Deployed", "Scored", None),  # and samples saved, see `_reached`
    "scored": ("Scored", "Recorded", None),
}


async def _reached(live: _Live, phase: str) -> bool:
    starts, _, extra = PHASES[phase]
    if live.cli.returncode is not None:
        pytest.fail(f"the run ended before phase {phase}:\n{live.services.run.progress}")
    if not live.seen(starts) or (extra is not None and not extra(live)):
        return False
    return phase != "grading" or await live.samples() >= GRADING_SAMPLES


async def _strike(services: Services, fault: Fault) -> datetime:
    at = datetime.now(UTC)
    if fault.target != "nats":
        services.kill(fault.target)
        return at
    await asyncio.to_thread(services.server.stop)
    await asyncio.sleep(NATS_DOWN_S)  # the outage itself
    await asyncio.to_thread(services.server.start)
    return at


async def _launch(services: Services) -> asyncio.subprocess.Process:
    run = services.run
    argv = ["-m", "sreforge", "run", SCENARIO, "--agent", run.agent]
    argv += ["--time-scale", TIME_SCALE, "--json"]
    with (run.root / "stderr.log").open("w") as stderr:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            cwd=REPO,
            env=services.env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )


async def execute(plan: Plan, run: Run) -> Outcome:
    """Run `plan` on a topology of its own; every failure is kept in `Outcome.error`."""
    outcome = Outcome(plan, run)
    try:
        with services_for(run) as services:
            try:
                await _drive(plan, services, outcome)
            finally:
                outcome.logs = {name: services.text(name) for name in services.processes}
                # Off the loop: the other plans' phase checks keep running meanwhile.
                outcome.stop_codes, outcome.outlived = await asyncio.to_thread(services.stop)
    except BaseException as error:  # pytest.fail included: reported per case
        outcome.error = f"{type(error).__name__}: {error}"
    return outcome


async def _drive(plan: Plan, services: Services, outcome: Outcome) -> None:
    run = services.run
    await services.ready()
    bus = await connect(services.nats_url, name=f"crash-{plan.name}", credential=services.operator)
    watch = StreamWatch(bus)
    cli = await _launch(services)
    run.pid, run.started = cli.pid, time.monotonic()
    live = _Live(services, watch, bus, cli)
    struck: list[tuple[Fault, datetime]] = []
    try:
        for fault in plan.faults:
            if fault.frozen_from is not None:

                async def frozen(fault: Fault = fault) -> bool:
                    return await _reached(live, fault.frozen_from or "")

                await until(frozen, f"{fault.name} (freeze):\n{run.progress}", RUN_LIMIT_S)
                services.freeze(fault.holding or fault.target)

            async def reached(fault: Fault = fault) -> bool:
                return await _reached(live, fault.phase)

            await until(reached, f"{fault.name}:\n{run.progress}", RUN_LIMIT_S)
            struck.append((fault, await _strike(services, fault)))
            if fault.holding is not None:
                services.thaw(fault.holding)
        stdout, _ = await asyncio.wait_for(cli.communicate(), RUN_LIMIT_S)
        run.wall_s, run.exit_code = time.monotonic() - run.started, cli.returncode
        run.stdout = stdout.decode()
        await watch.caught_up()
        for fault, at in struck:
            ends = [e.occurred_at for e in watch.of_type(PHASES[fault.phase][1])]
            outcome.hits.append(Hit(fault, at, min(ends) if ends else None))
        kinds = ("CiResult", "Deployed", "Scored", "Recorded", "RunFailed", "CleanedUp")
        outcome.counts = {kind: len(watch.of_type(kind)) for kind in kinds}
        outcome.events = [(event.type, event.occurred_at) for event in watch.events]
        fired = [event for event in watch.events if isinstance(event, TriggerFired)]
        if fired:  # published by the trigger as the notification reached it
            outcome.alert_delay_s = (
                fired[0].occurred_at - fired[0].trigger.fired_at
            ).total_seconds()
        outcome.redeployed = any(getattr(e, "redeployed", False) for e in watch.of_type("Deployed"))
    finally:
        if cli.returncode is None:
            kill_session(cli.pid)
            await cli.wait()
        await watch.close()
        with contextlib.suppress(Exception):
            await bus.close()


def slow_fix_script(into: Path) -> Path:
    """Write `slow-fix.sh`: the reference fix, applied after `SLOW_AGENT_WORK_S` of work."""
    (fix,) = (REPO / "use-cases").glob("/".join((*SCENARIO_PARTS, "solution", "fix.patch")))
    into.mkdir(parents=True, exist_ok=True)
    script = into / "slow-fix.sh"
    script.write_text(
        "# The reference fix, after a while of looking around (an agent phase to hit).\n"
        f"sleep {SLOW_AGENT_WORK_S}\n"
        f"git apply --index '{fix}'\n"
        'git commit -q -m "Apply fix"\n'
        "submit\n"
    )
    return into


def campaign(base: Path, plans: tuple[Plan, ...]) -> dict[str, Outcome]:
    """Run every plan at once, each on its own topology under `base`; by plan name."""
    scripts = slow_fix_script(base / "scripts")

    async def everything() -> list[Outcome]:
        runs = []
        for plan in plans:
            root = base / plan.name
            root.mkdir()
            runs.append(Run(plan.name, plan.agent, root, scripts_dir=scripts))
        return await asyncio.gather(*(execute(p, r) for p, r in zip(plans, runs, strict=True)))

    return {outcome.plan.name: outcome for outcome in asyncio.run(everything())}
