"""The multi-process topology: each service its own `sreforge serve`, one external nats-server.

`Services` starts the seven services of one run root against a nats-server it can
stop and start again (same port, same store), restarts any one of them, and stops
them all; `StreamWatch` reads the stream back across such outages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from sreforge_bus import OPERATOR_USER, STREAM, Bus, Credential
from sreforge_bus.embedded import NatsServer
from sreforge_contracts import ContractError, Event, parse_event

from sreforge._engine import bus_credentials
from sreforge._settings import EngineSettings
from sreforge.cli import SERVICE_NAMES

from ._pool import ENGINE_HOME, REPO, Run, kill_session

SERVICE_READY_S = 90.0
SERVICE_STOP_S = 20.0


@dataclass
class Services:
    """The seven services of one run root as separate processes, all on one nats-server.

    The server is external to the services (as an operator runs it) and configured
    with the run home's `server.conf`, so each `serve` logs in with its own credential.
    """

    run: Run
    server: NatsServer
    trigger_port: int
    operator: Credential
    processes: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)

    @property
    def nats_url(self) -> str:
        """The server's client URL (the same across its restarts)."""
        return self.server.url

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

    def text(self, name: str) -> str:
        """The service's whole log so far."""
        path = self.log(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def tail(self, name: str) -> str:
        """The end of the service's log, for failure messages."""
        return self.text(name)[-3000:] or "(no log)"

    def current(self, name: str) -> subprocess.Popen[bytes]:
        """The service's latest process."""
        return self.processes[name][-1]

    def freeze(self, name: str) -> None:
        """SIGSTOP the service's process group: it holds what it has and handles nothing
        more until `kill` (SIGKILL ends a stopped process too)."""
        os.killpg(self.current(name).pid, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        """SIGCONT the service's process group: a `freeze` lifted, it goes on."""
        os.killpg(self.current(name).pid, signal.SIGCONT)

    def kill(self, name: str) -> None:
        """SIGKILL the service's process group and start a fresh `serve` of it at once."""
        proc = self.current(name)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        self.serve(name)

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

    async def ready(self) -> None:
        """Every service bootstrapped its consumers and runs; the trigger listens."""

        async def check() -> bool:
            for name in SERVICE_NAMES:
                if (code := self.current(name).poll()) is not None:
                    pytest.fail(f"service {name} exited with {code}:\n{self.tail(name)}")
            logs = {name: self.text(name) for name in SERVICE_NAMES}
            return all('"engine.ready"' in text for text in logs.values()) and (
                '"trigger.listening"' in logs["trigger"]
            )

        await until(check, "every `sreforge serve` to report engine.ready", SERVICE_READY_S)


@contextlib.contextmanager
def services_for(run: Run) -> Iterator[Services]:
    """A nats-server enforcing the run home's bus users (its config outside the run root,
    so the check that nothing of the run is left does not count it) and the run's
    services, started and ready to be waited for; everything stopped afterwards."""
    credentials = bus_credentials(EngineSettings(home=run.root / ENGINE_HOME))
    config = Path(shutil.copy(credentials.config_file, run.root.parent / f"{run.name}.conf"))
    server = NatsServer(config_file=config).start()
    try:
        services = Services(run, server, free_port(), credentials.credential(OPERATOR_USER))
        try:
            for name in SERVICE_NAMES:
                services.serve(name)
            yield services
        finally:
            services.stop()
    finally:
        server.close()


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def until(check: Callable[[], Awaitable[bool]], what: str, limit_s: float) -> None:
    """Poll `check` every 0.2 s until it holds; fail the test after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.2)


class StreamWatch:
    """Every event on the stream, in order, read back message by message (not followed:
    a read survives the nats-server going down and coming back)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.events: list[Event] = []
        self.seen = 0  # the last stream sequence read, events or not
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the server is down: read again soon
                last = (await self.bus.js.stream_info(STREAM)).state.last_seq
                while self.seen < last:
                    message = await self.bus.js.get_msg(
                        STREAM, seq=self.seen + 1, subject="sreforge.>", next=True
                    )
                    self.seen = message.seq or last
                    with contextlib.suppress(ContractError):  # commands such as run.start
                        self.events.append(parse_event(message.data or b""))
            await asyncio.sleep(0.2)

    def of_type(self, kind: str) -> list[Event]:
        """The events of one type seen so far."""
        return [event for event in self.events if event.type == kind]

    async def caught_up(self) -> None:
        """Wait until every message stored so far has been read."""
        last = (await self.bus.js.stream_info(STREAM)).state.last_seq

        async def read_all() -> bool:
            return self.seen >= last

        await until(read_all, f"the stream reader to reach seq {last}", 20)

    async def close(self) -> None:
        """Stop reading."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def descendants(pid: int) -> list[str]:
    """The command lines of `pid`'s live descendants."""
    lines = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                lines.append(" ".join(child.cmdline()))
    return lines
