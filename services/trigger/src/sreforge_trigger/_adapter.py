"""The trigger as an engine service: the HTTP receiver (and poller) bound to the bus."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog
import uvicorn
from sreforge_bus import Bus, Service

from sreforge_trigger._app import create_app
from sreforge_trigger._errors import TriggerError
from sreforge_trigger._ingest import Ingest
from sreforge_trigger._poller import AlertPoller
from sreforge_trigger._settings import TriggerSettings

__all__ = ["SERVICE", "Listening", "TriggerService"]

log = structlog.get_logger("sreforge.trigger")

_STARTUP_DEADLINE_S = 10.0


class Listening:
    """Where a running trigger service accepts HTTP: set while the server is up.

    `wait()` may be called before `run` starts; it returns once the server listens.
    """

    def __init__(self) -> None:
        self.url: str | None = None
        self._ready = asyncio.Event()

    def _clear(self) -> None:
        self.url = None
        self._ready.clear()

    def _set(self, url: str) -> None:
        self.url = url
        self._ready.set()

    async def wait(self) -> str:
        """The base URL (`http://127.0.0.1:<port>`), once the server accepts connections."""
        await self._ready.wait()
        assert self.url is not None
        return self.url


class _Server(uvicorn.Server):
    """Uvicorn without its signal capture: the engine owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(frozen=True)
class TriggerService(Service):
    """Serves the webhook/feed receiver (and the poller, when configured) until `stop`.

    Consumes nothing from the bus: it only publishes. `settings` defaults to the
    environment (`SREFORGE_TRIGGER_*`), read when `run` starts.
    """

    name: str = "trigger"
    settings: TriggerSettings | None = None
    listening: Listening = field(default_factory=Listening, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", (self.receive,))

    async def receive(self, bus: Bus, stop: asyncio.Event) -> None:
        """The service's task: serve HTTP on the configured host/port until `stop` is set.

        A server or poller that dies early ends the service with its error (or
        `TriggerError`) instead of leaving the engine with a silent trigger.
        """
        settings = self.settings or TriggerSettings()
        app = create_app(bus.publish, settings)
        sock = _bind(settings.host, settings.port)
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=5
        )
        server = _Server(config)
        tasks = [asyncio.create_task(server.serve(sockets=[sock]), name="trigger-http")]
        if settings.poll_url:
            tasks.append(asyncio.create_task(_poll(bus, settings, stop), name="trigger-poller"))
        try:
            await _started(server, tasks[0])
            host, port = sock.getsockname()[:2]
            self.listening._set(f"http://{host}:{port}")
            log.info("trigger.listening", host=host, port=port, poller=bool(settings.poll_url))
            await _until_stopped(stop, tasks)
        finally:
            self.listening._clear()
            server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            sock.close()


async def _until_stopped(stop: asyncio.Event, tasks: list[asyncio.Task[None]]) -> None:
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if stop.is_set():
        return
    for task in tasks:
        if task.done():
            task.result()  # raises the task's error, if it had one
            raise TriggerError(f"trigger: {task.get_name()} stopped before the service was")


async def _poll(bus: Bus, settings: TriggerSettings, stop: asyncio.Event) -> None:
    assert settings.poll_url is not None
    ingest = Ingest(bus.publish, timeout=settings.publish_timeout, memory=settings.dedupe_size)
    poller = AlertPoller(
        settings.poll_url, ingest, interval=settings.poll_interval, route=settings.poll_route
    )
    await poller.run(stop)


def _bind(host: str, port: int) -> socket.socket:
    # proto must be IPPROTO_TCP for asyncio to set TCP_NODELAY on accepted connections;
    # without it Nagle and delayed ACKs add ~40 ms to every response.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise TriggerError(f"trigger: cannot listen on {host}:{port}: {err.strerror}") from None
    return sock


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    """Wait for uvicorn's startup (it has no event for it), failing if it dies first."""
    deadline = asyncio.get_running_loop().time() + _STARTUP_DEADLINE_S
    while not server.started:
        if serving.done():
            serving.result()
            raise TriggerError("trigger: HTTP server stopped during startup")
        if asyncio.get_running_loop().time() > deadline:
            raise TriggerError(f"trigger: HTTP server not up within {_STARTUP_DEADLINE_S}s")
        await asyncio.sleep(0.01)


SERVICE = TriggerService()
