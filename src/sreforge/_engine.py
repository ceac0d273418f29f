"""The engine process: find or start NATS, bootstrap the bus, run services, follow events."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog
from sreforge_bus import (
    BOOTSTRAP_USER,
    OPERATOR_USER,
    Bus,
    BusCredentials,
    BusError,
    Credential,
    CredentialError,
    HarnessSecrets,
    HostLease,
    Service,
    bootstrap,
    connect,
    ensure_credentials,
    follow,
    load_credentials,
    redact_url,
)
from sreforge_bus.embedded import NatsServer, start_nats_server
from sreforge_contracts import RunFailed

from sreforge._errors import EngineNotRunning
from sreforge._logging import configure_logging
from sreforge._settings import EngineSettings
from sreforge._tail import format_event_json, format_event_line

__all__ = [
    "RunningEngine",
    "advertised_url",
    "bus_credentials",
    "load_services",
    "operator_credential",
    "run_engine",
    "running_engine",
    "tail_events",
    "wire_defaults",
]

log = structlog.get_logger("sreforge.engine")
_WORKER_THREADS = 32


def load_services(names: Sequence[str]) -> list[Service]:
    """Import each named service package and return its `SERVICE` description."""
    return [importlib.import_module(f"sreforge_{name}").SERVICE for name in names]


def bus_credentials(settings: EngineSettings, worker: str | None = None) -> BusCredentials:
    """The engine home's bus credentials (created on first use) and their server config.

    Every service's durable consumers are listed, even when this process runs only one,
    so separate `sreforge serve` processes all render the same `server.conf`; so are the
    durables of every worker host named in `SREFORGE_WORKER_HOSTS` (and `worker`).
    """
    from sreforge._workers import pinned_durables
    from sreforge.cli import SERVICE_NAMES

    hosts = settings.known_worker_hosts(worker)
    durables = {
        service.name: list(
            dict.fromkeys(
                [route.consumer.durable for route in service.routes]
                + [d for host in hosts for d in pinned_durables(service, host)]
            )
        )
        for service in load_services(SERVICE_NAMES)
    }
    return ensure_credentials(settings.bus_dir, durables)


def operator_credential(settings: EngineSettings) -> Credential:
    """The operator's credential for `sreforge run` and `tail`: read from the home (quick, no
    service imports); created with all the others only if the home has none yet."""
    try:
        return load_credentials(settings.bus_dir).credential(OPERATOR_USER)
    except CredentialError:
        return bus_credentials(settings).credential(OPERATOR_USER)


def run_engine(names: Sequence[str], *, embedded: bool = True, worker: str | None = None) -> int:
    """Run the named services until SIGINT/SIGTERM: 0 on a clean stop, 1 if a service died.

    `embedded=False` is `sreforge serve`: one service of several separate processes.
    `worker` runs them as that worker host (`sreforge serve --worker HOST`, `_workers`).
    """
    settings = EngineSettings()
    configure_logging(settings.log_format, settings.log_level)
    wire_defaults(settings, separate_processes=not embedded)
    services = load_services(names)
    if worker is not None:
        from sreforge._workers import worker_services

        lease = HostLease(worker, settings.worker_lease_ttl_seconds)
        services = worker_services(services, lease, settings.worker_slots)
    crashed = asyncio.run(
        _serve_until_signalled(settings, services, embedded=embedded, worker=worker)
    )
    return 1 if crashed else 0


def wire_defaults(settings: EngineSettings, *, separate_processes: bool = False) -> None:
    """Point the services at each other where the operator configured nothing.

    The trigger and the stacks' Alertmanagers share one bearer-token file under the
    engine's home, the deployer records that home in each stack, and learns where the
    trigger listens: a free port when
    every service shares this process, the trigger's fixed default port when they run as
    separate processes (which cannot agree on a random one). Explicit `SREFORGE_*`
    settings always win.
    """
    token_file = str(settings.home / "trigger.token")
    if "SREFORGE_TRIGGER_TOKEN" not in os.environ:
        os.environ.setdefault("SREFORGE_TRIGGER_TOKEN_FILE", token_file)
    if not separate_processes:
        os.environ.setdefault("SREFORGE_TRIGGER_PORT", str(_free_port()))
    port = os.environ.get("SREFORGE_TRIGGER_PORT", str(_default_trigger_port()))
    os.environ.setdefault(
        "SREFORGE_DEPLOYER_ALERT_WEBHOOK_BASE", f"http://127.0.0.1:{port}/v1/alertmanager"
    )
    os.environ.setdefault(
        "SREFORGE_DEPLOYER_ALERT_TOKEN_FILE",
        os.environ.get("SREFORGE_TRIGGER_TOKEN_FILE", token_file),
    )
    # Stack records name their home, so `stack down --all` stops only this home's stacks.
    os.environ.setdefault("SREFORGE_DEPLOYER_ENGINE_HOME", str(settings.home))
    from sreforge._dashboard_wiring import wire_dashboard  # the recorder's live dashboard

    wire_dashboard(settings)


def _default_trigger_port() -> int:
    from sreforge_trigger import TriggerSettings

    port: int = TriggerSettings.model_fields["port"].default
    return port


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def tail_events(*, run_id: str | None, as_json: bool, only_new: bool) -> int:
    """Print the bus's events as they arrive until interrupted."""
    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    subject = f"sreforge.run.{run_id}.>" if run_id else "sreforge.>"
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_tail(settings, subject, as_json=as_json, only_new=only_new))
    except BusError as error:  # e.g. the engine refused the operator's login
        print(f"sreforge tail: {error}", file=sys.stderr)
        return 2
    return 0


@dataclass
class RunningEngine:
    """Services running in this process on one bus; `crashed` says if one stopped early."""

    bus: Bus
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    buses: dict[str, Bus] = field(default_factory=dict)
    """Each service's own connection, by service name (empty: the engine runs elsewhere)."""
    records_dir: Path | None = None
    """Where this process's recorder writes `<run_id>/record.json` (None: no recorder here)."""

    async def end_run(self, run_id: str, stage: str, reason: str, verdict: str) -> bool:
        """End a run of this engine through the normal path: a RunFailed published with the
        correlator's own credential (the run's state moves to failed, the recorder writes
        its record, the deployer cleans up after it). False when no correlator runs in this
        process: the engine elsewhere finishes the run."""
        correlator = self.buses.get("correlator")
        if correlator is None or verdict not in ("aborted", "error"):
            return False
        failed = RunFailed(
            run_id=run_id,
            producer="engine",
            stage=stage,
            reason=reason,
            verdict="aborted" if verdict == "aborted" else "error",
        )
        try:
            await correlator.publish(failed)
        except BusError as error:
            log.error("engine.end_run_failed", run_id=run_id, error=repr(error))
            return False
        return True

    def crashed(self) -> str | None:
        """`service <name> stopped: <error>` for the first service that stopped on its own."""
        for name, task in self.tasks.items():
            if task.done():
                error = None if task.cancelled() else task.exception()
                return f"service {name} stopped: {error!r}"
        return None


@contextlib.asynccontextmanager
async def running_engine(
    settings: EngineSettings,
    services: Sequence[Service],
    *,
    embedded: bool = True,
    store_dir: Path | None = None,
    advertise: bool = False,
    worker: str | None = None,
) -> AsyncIterator[RunningEngine]:
    """Bootstrap the bus and run `services` in this process until the block exits.

    With no `settings.nats_url` (and `embedded`), a pinned nats-server is started in
    `store_dir` (a temporary store when None) with the home's bus users, and stopped
    afterwards; `advertise` writes it to `engine.json` so other shells find it. The bus
    is bootstrapped as `bootstrap`; each service connects as itself (its own connection,
    so its permissions apply) and the engine's own bus (`RunningEngine.bus`) is the
    operator's. Services stop gracefully on exit.
    """
    # Stacks, CI and git run in worker threads and hold one for seconds at a time; the
    # default pool (cores + 4) would let a few runs starve every other service.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=_WORKER_THREADS, thread_name_prefix="sreforge")
    )
    async with contextlib.AsyncExitStack() as stack:
        url = settings.nats_url
        if url is None and not embedded:
            raise EngineNotRunning("`sreforge serve` needs SREFORGE_NATS_URL")
        credentials = await asyncio.to_thread(bus_credentials, settings, worker)
        await asyncio.to_thread(_reap_orphaned_stacks)
        secrets = HarnessSecrets.of_home(settings.home, settings.bus_dir)
        if url is None:
            server = stack.enter_context(
                # A SIGKILLed engine (a run killed at a deadline) must not leave its bus.
                start_nats_server(
                    store_dir=store_dir, config_file=credentials.config_file, die_with_parent=True
                )
            )
            if advertise:
                stack.enter_context(_advertise(settings, server))
            url = server.url
            log.info("engine.embedded_nats", url=url, store_dir=str(server.store_dir))
        setup = await _connect_as(url, credentials, BOOTSTRAP_USER)
        if not setup.server_requires_auth:
            log.warning(
                "engine.bus_unauthenticated",
                url=redact_url(url),
                hint=f"the server takes anyone; start it with -c {credentials.config_file}",
            )
        try:
            consumers = [route.consumer for s in services for route in s.routes]
            await bootstrap(setup, consumers, replicas=settings.nats_replicas)
        finally:
            await setup.close()
        bus = await _connect_as(url, credentials, OPERATOR_USER, client="engine", secrets=secrets)
        stack.push_async_callback(bus.close)
        stop = asyncio.Event()
        engine = RunningEngine(bus)
        for service in services:
            own = await _connect_as(url, credentials, service.name, secrets=secrets)
            stack.push_async_callback(own.close)
            engine.buses[service.name] = own
            engine.tasks[service.name] = asyncio.create_task(service.run(own, stop))
        try:
            yield engine
        finally:
            stop.set()
            await asyncio.gather(*engine.tasks.values(), return_exceptions=True)


def _reap_orphaned_stacks() -> None:
    """Tear down the stacks under this engine's runs root whose owner died with its warden
    (`reap_orphans`), saying so: no other engine would."""
    from sreforge_deployer import DeployerSettings
    from sreforge_deployer.local import reap_orphans

    for reaped in reap_orphans(DeployerSettings().runs_root):
        log.warning("engine.reaped_stack", run_id=reaped.record.run_id, detail=str(reaped))


async def _connect_as(
    url: str,
    credentials: BusCredentials,
    user: str,
    *,
    client: str | None = None,
    secrets: HarnessSecrets | None = None,
) -> Bus:
    credential = credentials.credential(user)
    name = f"sreforge-{client or user}"
    return await connect(url, name=name, credential=credential, secrets=secrets)


async def _serve_until_signalled(
    settings: EngineSettings, services: list[Service], *, embedded: bool, worker: str | None
) -> bool:
    """Serve until signalled; True when a service died on its own and ended the engine."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_engine(
        settings,
        services,
        embedded=embedded,
        store_dir=settings.bus_dir,
        advertise=True,
        worker=worker,
    ) as engine:
        log.info("engine.ready", services=[service.name for service in services], worker=worker)
        stopped = asyncio.create_task(stop.wait())
        crash = None
        while not stop.is_set() and crash is None:
            await asyncio.wait([stopped], timeout=1.0)
            if crash := engine.crashed():
                log.error("engine.service_crashed", reason=crash)
        stopped.cancel()
        log.info("engine.stopping")
    return crash is not None


async def _tail(settings: EngineSettings, subject: str, *, as_json: bool, only_new: bool) -> None:
    url = settings.nats_url or advertised_url(settings)
    if url is None:
        raise EngineNotRunning("no engine to follow: start `sreforge up` or set SREFORGE_NATS_URL")
    bus = await connect(url, name="sreforge-tail", credential=operator_credential(settings))
    try:
        async for message in follow(bus, subject, deliver="new" if only_new else "all"):
            line = (
                format_event_json(message.subject, message.data, message.seq)
                if as_json
                else format_event_line(message.subject, message.data, datetime.now(UTC))
            )
            print(line, flush=True)
    finally:
        await bus.close()


@contextlib.contextmanager
def _advertise(settings: EngineSettings, server: NatsServer) -> Iterator[None]:
    settings.home.mkdir(parents=True, exist_ok=True)
    record = {"nats_url": server.url, "pid": os.getpid()}
    settings.engine_file.write_text(json.dumps(record))
    try:
        yield
    finally:
        settings.engine_file.unlink(missing_ok=True)


def advertised_url(settings: EngineSettings) -> str | None:
    """The NATS URL a live `sreforge up` advertises in `engine.json`, if any."""
    try:
        record = json.loads(settings.engine_file.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    url = record.get("nats_url")
    return url if isinstance(url, str) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
