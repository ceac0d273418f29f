"""The control and metrics endpoints, served by threads of their own.

A scrape must answer even when the generator's event loop is starved (a loaded host
lags it by seconds, hundreds of answers queue behind each other): the server runs in
its own threads and reads `/metrics`, `/healthz` and `/status` without the loop. What
changes the generator (`/pause`, `/resume`, `/warmup`) hops onto the loop
(`run_coroutine_threadsafe`) and answers once the loop has done it, so the generator's
state is only ever changed by its loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ._generator import LoadGenerator

__all__ = ["ControlServer"]

log = logging.getLogger("loadgen")
_IDLE_SECONDS = 60.0
"""A keep-alive connection idle this long is closed (its thread ends)."""


class ControlServer:
    """GET /healthz /metrics /status; POST /pause /resume /warmup on `host:port`.

    The listener is bound on construction (a taken port raises `OSError` at once);
    `start` serves it from a daemon thread, one more per connection.
    """

    def __init__(
        self, generator: LoadGenerator, loop: asyncio.AbstractEventLoop, host: str, port: int
    ) -> None:
        self._generator = generator
        self._loop = loop
        self._server = _Server((host, port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="loadgen-control", daemon=True
        )

    @property
    def port(self) -> int:
        """The port it listens on (useful when bound to port 0)."""
        port: int = self._server.server_address[1]
        return port

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread.start()

    def close(self) -> None:
        """Stop accepting; connections still open die with the process."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def metrics(self) -> bytes:
        """The exposition text, read without the loop."""
        return generate_latest(self._generator.metrics.registry)

    def status(self) -> dict[str, object]:
        """Profile, target and achieved rate, paused; read without the loop."""
        generator = self._generator
        return {
            "profile": generator.profile.name,
            "target_rps": generator.rate,
            "achieved_rps": round(generator.window.rate(), 3),
            "paused": generator.paused,
        }

    def on_loop(self, act: Callable[[], Any]) -> Any:
        """Run `act` on the generator's loop (awaited if it is a coroutine); its result."""

        async def call() -> Any:
            outcome = act()
            return await outcome if asyncio.iscoroutine(outcome) else outcome

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)


def _handler_for(control: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = _IDLE_SECONDS

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(HTTPStatus.OK, control.metrics(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._json(HTTPStatus.OK, {"status": "ok"})
            elif self.path == "/status":
                self._json(HTTPStatus.OK, control.status())
            else:
                self._not_found()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            generator = control._generator
            acts: dict[str, Callable[[], Any]] = {
                "/pause": generator.pause,
                "/resume": generator.resume,
                "/warmup": generator.warmup,
            }
            act = acts.get(self.path)
            if act is None:
                self._not_found()
                return
            try:
                outcome = control.on_loop(act)
            except (CancelledError, RuntimeError):  # the loop is stopping
                self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "stopping"})
                return
            if self.path == "/warmup":
                self._json(HTTPStatus.OK, {"requests": outcome.requests, "ok": outcome.ok,
                                           "seconds": outcome.seconds})  # fmt: skip
            else:
                self._json(HTTPStatus.OK, control.status())

        def _not_found(self) -> None:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no route {self.command} {self.path}"})

        def _json(self, status: HTTPStatus, payload: dict[str, object]) -> None:
            self._reply(status, json.dumps(payload).encode(), "application/json")

        def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def version_string(self) -> str:
            return "loadgen"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("control: " + format, *args)

    return Handler
