"""End to end over the multi-process topology: two single kills CI runs (the matrix of
issue 12 is `test_crash_safety.py`, by hand until it is green as a whole).

Every service is its own `python -m sreforge serve <name>` process against one
external nats-server (SPEC §2); `sreforge run` then only submits and follows. One
service's process group gets SIGKILL mid-run and a fresh `sreforge serve` of it takes
over: the oracle while it grades the reference fix, the deployer while CI runs it.
The run still ends with one verdict (passed), one record, and nothing left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest
from sreforge_bus import OPERATOR_USER, STREAM, Bus, Credential, RawMessage, connect, follow
from sreforge_bus.embedded import start_nats_server
from sreforge_contracts import ContractError, Event, parse_event
from sreforge_oracle import RunJournal
from wholerun import (
    ENGINE_HOME,
    REPO,
    RUN_LIMIT_S,
    SCENARIO,
    SCHEMA,
    TIME_SCALE,
    Run,
    assert_nothing_left,
    kill_session,
)

from sreforge._engine import bus_credentials
from sreforge._settings import EngineSettings
from sreforge.cli import SERVICE_NAMES

pytestmark = pytest.mark.integration

SERVICE_READY_S = 60.0
SERVICE_STOP_S = 20.0
GRADING_SAMPLES = 3  # saved samples before the kill: grading is under way


@dataclass
class Topology:
    """The seven services as separate processes, all on one nats-server.

    The server is external to the services (as an operator runs it) and configured
    with the run home's `server.conf`, so each `serve` logs in with its own credential.
    """

    run: Run
    nats_url: str
    trigger_port: int
    operator: Credential
    processes: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        """One log file per service name (a restarted service appends to its own)."""
        return self.run.root / "logs"

    def env(self) -> dict[str, str]:
        """The run's isolated env plus what `wire_defaults` cannot agree on across processes."""
        home = self.run.engine_home
        env = self.run.env()
        env.update(
            SREFORGE_NATS_URL=self.nats_url,
            SREFORGE_TRIGGER_PORT=str(self.trigger_port),
            SREFORGE_TRIGGER_TOKEN_FILE=str(home / "trigger.token"),
            SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE=(
                f"http://127.0.0.1:{self.trigger_port}/v1/alertmanager"
            ),
            SREFORGE_DEPLOYER_ALERT_TOKEN_FILE=str(home / "trigger.token"),
        )
        return env

    def serve(self, name: str) -> subprocess.Popen[bytes]:
        """Start `sreforge serve <name>` in its own session, logging to `logs/<name>.log`."""
        self.logs.mkdir(exist_ok=True)
        with self.log(name).open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sreforge", "serve", name],
                cwd=REPO,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.setdefault(name, []).append(proc)
        return proc

    def log(self, name: str) -> Path:
        """The service's log file."""
        return self.logs / f"{name}.log"

    def tail(self, name: str) -> str:
        """The end of the service's log, for failure messages."""
        path = self.log(name)
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    def current(self, name: str) -> subprocess.Popen[bytes]:
        """The service's latest process."""
        return self.processes[name][-1]

    def stop(self) -> tuple[dict[str, int | None], list[str]]:
        """SIGTERM every live service, wait, SIGKILL stragglers.

        Returns the exit codes by name and what was still alive in the services'
        sessions once they had exited (killed too).
        """
        live = [(n, p) for n, ps in self.processes.items() for p in ps if p.poll() is None]
        for _, proc in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, proc in live:
            try:
                codes[name] = proc.wait(timeout=SERVICE_STOP_S)
            except subprocess.TimeoutExpired:
                codes[name] = None
        sessions = {proc.pid for _, proc in live}
        left = [f"{p.pid} {p.info['cmdline']}" for p in psutil.process_iter(["cmdline"])
                if _session(p.pid) in sessions]  # fmt: skip
        for session in sessions:
            kill_session(session)
        return codes, left


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def topology() -> Iterator[Topology]:
    """A neutral run root, a nats-server enforcing its home's bus users, and the services'
    processes, all stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="runs-")) / "restart"
    root.mkdir()
    credentials = bus_credentials(EngineSettings(home=root / ENGINE_HOME))
    # The server is the test's, not the run's: its command line must not name the run's
    # root, or the check that nothing of the run is left would count it.
    config = shutil.copy(credentials.config_file, root.parent / "server.conf")
    try:
        with start_nats_server(config_file=Path(config)) as server:
            operator = credentials.credential(OPERATOR_USER)
            run = Run("restart", "reference", root)
            services = Topology(run, server.url, _free_port(), operator)
            try:
                yield services
            finally:
                services.stop()
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


async def _until(check: Callable[[], Awaitable[bool]], what: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.2)


async def _all_ready(services: Topology) -> None:
    """Every service bootstrapped its consumers and runs; the trigger listens."""

    async def ready() -> bool:
        for name in SERVICE_NAMES:
            if (code := services.current(name).poll()) is not None:
                pytest.fail(f"service {name} exited with {code}:\n{services.tail(name)}")
        logs = {name: services.log(name).read_text(errors="replace") for name in SERVICE_NAMES}
        return all('"engine.ready"' in text for text in logs.values()) and (
            '"trigger.listening"' in logs["trigger"]
        )

    await _until(ready, "every `sreforge serve` to report engine.ready", SERVICE_READY_S)


class StreamWatch:
    """Every event on the stream, in order, as a background follower sees them."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.events: list[tuple[RawMessage, Event]] = []
        self.seen = 0  # the last stream sequence read, events or not
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in follow(self.bus, "sreforge.>"):
            self.seen = message.seq
            with contextlib.suppress(ContractError):  # commands such as run.start
                self.events.append((message, parse_event(message.data)))

    def of_type(self, kind: str) -> list[Event]:
        """The events of one type seen so far."""
        if self._task.done():
            self._task.result()  # surfaces the follower's error
        return [event for _, event in self.events if event.type == kind]

    async def caught_up(self) -> None:
        """Wait until every message stored so far has been read."""
        last = (await self.bus.js.stream_info(STREAM)).state.last_seq

        async def read_all() -> bool:
            return self.seen >= last

        await _until(read_all, f"the stream follower to reach seq {last}", 10)

    async def close(self) -> None:
        """Stop following."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def _launch_run(services: Topology) -> asyncio.subprocess.Process:
    argv = [sys.executable, "-m", "sreforge", "run", SCENARIO, "--agent", "reference"]
    argv += ["--time-scale", TIME_SCALE, "--json"]
    stderr = (services.run.root / "stderr.log").open("w")
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=REPO,
            env=services.env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    finally:
        stderr.close()


@pytest.mark.timeout(300)
async def test_oracle_killed_mid_grading_and_restarted_still_records_one_verdict(
    topology: Topology,
) -> None:
    """SIGKILL the oracle while it grades the reference fix, restart it: one verdict, passed.

    Pins the multi-process topology (each `serve` bootstraps its own consumers) and
    the oracle's resume: the outage is read back from Prometheus's history, so the
    good fix still passes, with exactly one Scored, one Recorded, one record.
    """
    run = topology.run
    for name in SERVICE_NAMES:
        topology.serve(name)
    await _all_ready(topology)
    bus = await connect(topology.nats_url, name="crash-test", credential=topology.operator)
    watch = StreamWatch(bus)
    cli = await _launch_run(topology)
    run.pid, run.started = cli.pid, time.monotonic()
    try:
        outage = await _kill_and_restart_oracle(topology, watch, bus, cli)
        stdout, _ = await asyncio.wait_for(cli.communicate(), RUN_LIMIT_S)
        run.wall_s, run.exit_code = time.monotonic() - run.started, cli.returncode
        run.stdout = stdout.decode()
        await watch.caught_up()
        _check_outcome(topology, watch, outage)
    finally:
        if cli.returncode is None:
            kill_session(cli.pid)
            await cli.wait()
        await watch.close()
        await bus.close()
    codes, left = topology.stop()
    assert all(code == 0 for code in codes.values()), f"services did not stop cleanly: {codes}"
    assert not left, f"processes outlived their service: {left}"


@dataclass(frozen=True)
class Outage:
    """When the oracle died, when its successor saved new samples, what was saved before."""

    killed: datetime
    resumed: datetime
    saved: int

    @property
    def seconds(self) -> float:
        """How long grading went unwatched."""
        return (self.resumed - self.killed).total_seconds()


async def _kill_and_restart_oracle(
    services: Topology, watch: StreamWatch, bus: Bus, cli: asyncio.subprocess.Process
) -> Outage:
    """Kill the oracle once grading has saved samples, restart it, wait until it resumes."""

    async def deployed() -> bool:
        if cli.returncode is not None:
            pytest.fail(f"the run ended before Deployed:\n{services.run.progress}")
        return bool(watch.of_type("Deployed"))

    await _until(deployed, f"Deployed:\n{services.run.progress}", RUN_LIMIT_S - 60)
    run_id = watch.of_type("Deployed")[0].run_id
    assert run_id is not None
    journal = RunJournal(bus.runs, run_id)

    async def grading() -> bool:
        return len(await journal.samples()) >= GRADING_SAMPLES

    await _until(grading, f"saved samples:\n{services.tail('oracle')}", 60)
    oracle = services.current("oracle")
    os.killpg(oracle.pid, signal.SIGKILL)
    assert oracle.wait(timeout=10) == -signal.SIGKILL
    killed = datetime.now(UTC)
    saved = len(await journal.samples())
    assert not watch.of_type("Scored"), "grading ended before the kill: nothing to prove"
    services.serve("oracle")

    async def resumed() -> bool:
        return len(await journal.samples()) > saved

    await _until(resumed, f"the new oracle resuming:\n{services.tail('oracle')}", 60)
    return Outage(killed, datetime.now(UTC), saved)


def _check_outcome(services: Topology, watch: StreamWatch, outage: Outage) -> None:
    run = services.run
    print(f"\nwall {run.wall_s:.1f} s, exit {run.exit_code}; oracle out {outage.seconds:.1f} s")
    record = _check_one_passed_record(services, watch, "oracle")
    _assert_outage_observed(record["sli_series"], outage)


def _check_one_passed_record(services: Topology, watch: StreamWatch, killed: str) -> dict[str, Any]:
    """One JSON outcome, one Scored/Recorded/record, no RunFailed, passed, nothing left."""
    run = services.run
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one JSON outcome, got {run.stdout!r}\n{run.progress}"
    outcome = json.loads(lines[0])
    kinds = {kind: len(watch.of_type(kind)) for kind in ("Scored", "Recorded", "RunFailed")}
    assert kinds == {"Scored": 1, "Recorded": 1, "RunFailed": 0}, (
        f"{kinds}\n{run.progress}\n{killed}:\n{services.tail(killed)}"
    )
    records = sorted(run.records_dir.glob("*/record.json"))
    assert len(records) == 1, f"expected one record, found {records}\n{run.progress}"
    assert outcome["record"] == str(records[0])
    record: dict[str, Any] = json.loads(records[0].read_text())
    jsonschema.validate(record, json.loads(SCHEMA.read_text()))
    for found in record["score"]["signals"]:
        print(f"  {found['id']:<16} {found['satisfied']!s:<5} {found['detail']}")
    assert record["run_id"] == outcome["run_id"]
    assert outcome["verdict"] == record["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 0
    assert_nothing_left(run, records[0].parent, set())
    return record


def _assert_outage_observed(series: list[dict[str, object]], outage: Outage) -> None:
    """The window kept its pre-kill samples and has no hole anywhere near the outage."""
    times = [datetime.fromisoformat(str(sample["at"])) for sample in series]
    assert len(times) > outage.saved, "the samples saved before the kill were dropped"
    assert times[0] < outage.killed < times[-1], "the window does not span the kill"
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    assert max(gaps) < outage.seconds / 2, (
        f"a {max(gaps):.1f} s hole in a window whose oracle was out {outage.seconds:.1f} s"
    )


@pytest.mark.timeout(300)
async def test_deployer_killed_during_ci_and_restarted_resumes_and_still_passes(
    topology: Topology,
) -> None:
    """SIGKILL the deployer while CI tests the reference fix, restart it: passed, one record.

    The stack outlives its deployer (own process groups, `stack.json`); the new one
    takes the pending CI claim over (its holder is gone), runs the gate again, adopts
    the stack to merge and redeploy it, and tears it down after the record.
    """
    run = topology.run
    for name in SERVICE_NAMES:
        topology.serve(name)
    await _all_ready(topology)
    bus = await connect(topology.nats_url, name="crash-test", credential=topology.operator)
    watch = StreamWatch(bus)
    cli = await _launch_run(topology)
    run.pid, run.started = cli.pid, time.monotonic()
    try:
        killed = await _kill_deployer_during_ci(topology, watch, cli)
        stdout, _ = await asyncio.wait_for(cli.communicate(), RUN_LIMIT_S)
        run.wall_s, run.exit_code = time.monotonic() - run.started, cli.returncode
        run.stdout = stdout.decode()
        await watch.caught_up()
        (ci,) = watch.of_type("CiResult")
        back = (ci.occurred_at - killed).total_seconds()
        print(f"\nwall {run.wall_s:.1f} s, exit {run.exit_code}; CiResult {back:.1f} s after kill")
        _check_one_passed_record(topology, watch, "deployer")
        once = {kind: len(watch.of_type(kind)) for kind in ("CiResult", "Deployed", "CleanedUp")}
        assert once == {"CiResult": 1, "Deployed": 1, "CleanedUp": 1}, once
        (deployed,) = watch.of_type("Deployed")
        assert getattr(deployed, "redeployed", False), deployed
        assert '"deployer.stage_resumed"' in topology.log("deployer").read_text()
    finally:
        if cli.returncode is None:
            kill_session(cli.pid)
            await cli.wait()
        await watch.close()
        await bus.close()
    codes, left = topology.stop()
    assert all(code == 0 for code in codes.values()), f"services did not stop cleanly: {codes}"
    assert not left, f"processes outlived their service: {left}"


async def _kill_deployer_during_ci(
    services: Topology, watch: StreamWatch, cli: asyncio.subprocess.Process
) -> datetime:
    """Once CI's pytest runs under the deployer, SIGKILL the deployer and start a new one."""
    deployer = services.current("deployer")

    async def testing() -> bool:
        if cli.returncode is not None:
            pytest.fail(f"the run ended before CI:\n{services.run.progress}")
        assert not watch.of_type("CiResult"), "CI finished before the kill: nothing to prove"
        return any("pytest" in line for line in _descendants(deployer.pid))

    await _until(testing, f"CI under the deployer:\n{services.run.progress}", RUN_LIMIT_S - 60)
    os.killpg(deployer.pid, signal.SIGKILL)
    assert deployer.wait(timeout=10) == -signal.SIGKILL
    killed = datetime.now(UTC)
    services.serve("deployer")
    return killed


def _descendants(pid: int) -> list[str]:
    """The command lines of `pid`'s live descendants."""
    lines = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                lines.append(" ".join(child.cmdline()))
    return lines
