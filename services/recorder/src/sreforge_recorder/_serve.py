"""The recorder's live dashboard: the `sreforge_report` app served by uvicorn on loopback.

Served only with the operator's token (`RecorderSettings.dashboard_secret`); the URL is
logged without it. A port taken by another engine is not fatal: the dashboard moves to a
free port and says so (the recorder's records matter more than its page), and writes the
URL it listens on to `dashboard_url_file` for clients to find.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import structlog
import uvicorn
from sreforge_bus import Bus
from sreforge_report import create_dashboard

from sreforge_recorder._settings import RecorderSettings
from sreforge_recorder._store import _write_atomic
from sreforge_recorder._watch import BusWatch

__all__ = ["serve_dashboard"]

log = structlog.get_logger("sreforge.recorder")

_STARTUP_DEADLINE_S = 10.0


class _Server(uvicorn.Server):
    """Uvicorn without its signal capture: the engine owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_dashboard(settings: RecorderSettings, bus: Bus, stop: asyncio.Event) -> None:
    """Serve the dashboard until `stop` (returns at once when it is off or has no token)."""
    token = settings.dashboard_secret()
    if not settings.dashboard or token is None:
        if settings.dashboard:
            log.warning("recorder.dashboard_off", reason="no operator token configured")
        await stop.wait()
        return
    sock = _bind(settings.dashboard_host, settings.dashboard_port)
    watch = BusWatch(bus)
    await watch.start()
    app = create_dashboard(settings.runs_dir, token, watch)
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=1
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="recorder-dashboard")
    url = ""
    try:
        await _started(server, serving)
        host, port = sock.getsockname()[:2]
        loopback = host in {"127.0.0.1", "::1", "localhost"}
        url = f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
        log.info("recorder.dashboard", url=url, loopback=loopback)
        if settings.dashboard_url_file is not None:
            _write_atomic(settings.dashboard_url_file, url + "\n")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, serving], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if serving.done() and not stop.is_set():
            serving.result()
            log.error("recorder.dashboard_stopped")
            await stop.wait()
    finally:
        server.should_exit = True
        server.force_exit = True  # open SSE streams do not hold the engine's stop
        await asyncio.gather(serving, return_exceptions=True)
        await watch.stop()
        sock.close()
        if url and settings.dashboard_url_file is not None:
            _forget(settings.dashboard_url_file, url)


def _forget(path: Path, url: str) -> None:
    """Remove the URL file if it still names this dashboard (not another engine's since)."""
    with contextlib.suppress(OSError):
        if path.read_text().strip() == url:
            path.unlink()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        if port == 0:
            sock.close()
            raise
        log.warning("recorder.dashboard_port_taken", port=port, error=error.strerror)
        sock.bind((host, 0))
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    """Wait for uvicorn's startup (it has no event for it), failing if it dies first."""
    deadline = asyncio.get_running_loop().time() + _STARTUP_DEADLINE_S
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("recorder: dashboard server stopped during startup")
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"recorder: dashboard not up within {_STARTUP_DEADLINE_S}s")
        await asyncio.sleep(0.01)
