"""The replay server: one loopback HTTP server, a flavor per provider API, routed by path."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

from ._script import Received, Script, Turn


@dataclass(frozen=True)
class Reply:
    """What the server writes back: a status, a content type and the body's chunks."""

    status: int
    content_type: str
    chunks: Sequence[bytes]

    @classmethod
    def json(cls, document: Any, status: int = 200) -> Reply:
        """A JSON answer."""
        return cls(status, "application/json", [json.dumps(document).encode()])

    @classmethod
    def sse(cls, events: Sequence[tuple[str | None, Any]]) -> Reply:
        """A server-sent-events stream: (event name or None, JSON data) per event."""
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            chunks.append(f"{head}data: {payload}\n\n".encode())
        return cls(200, "text/event-stream", chunks)


class Flavor(Protocol):
    """One provider API: which paths it serves and how a turn is written in it."""

    def serves(self, request: Received) -> bool:
        """Whether `request` is this API's (by method and path)."""
        ...

    def reply(self, turn: Turn, request: Received) -> Reply:
        """`turn` in this API's shape, streamed when `request` asks for it."""
        ...


def _flavors() -> list[Flavor]:
    from ._anthropic import AnthropicMessages
    from ._gemini import GeminiGenerate
    from ._openai_chat import OpenAIChat
    from ._responses import OpenAIResponses

    return [OpenAIChat(), OpenAIResponses(), AnthropicMessages(), GeminiGenerate()]


@dataclass
class ReplayServer:
    """A scripted model on 127.0.0.1 (a free port); use as a context manager.

    `url` is the base to put in a profile's `metadata.upstream` (add `/v1` for the
    OpenAI flavors); `received` lists every request, in order, for the test to assert.
    """

    script: Script
    model: str = "replay-1"
    received: list[Received] = field(default_factory=list)
    flavors: list[Flavor] = field(default_factory=_flavors)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>` (no path)."""
        if self._server is None:
            raise RuntimeError("the replay server is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ReplayServer:
        """Listen and serve in a daemon thread."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._handle))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def calls(self, predicate: Callable[[Received], bool] | None = None) -> list[Received]:
        """The received requests a flavor served (model calls), optionally filtered."""
        with self._lock:
            served = [r for r in self.received if any(f.serves(r) for f in self.flavors)]
        return [r for r in served if predicate is None or predicate(r)]

    def _handle(self, request: Received) -> Reply:
        with self._lock:
            self.received.append(request)
        if request.method == "GET" and request.flavor_path.rstrip("/").endswith("/models"):
            return Reply.json({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        for flavor in self.flavors:
            if flavor.serves(request):
                return flavor.reply(self.script.answer(request), request)
        return Reply.json({"error": {"message": f"replay: no flavor serves {request.path}"}}, 404)


def _handler(handle: Callable[[Received], Reply]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            self._serve(body)

        def _serve(self, body: Any) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = handle(Received(self.command, self.path, headers, body))
            payload = b"".join(reply.chunks)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

    return Handler
