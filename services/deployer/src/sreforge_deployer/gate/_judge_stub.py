"""The judge's stand-in for every dependency of the judged service: a loopback HTTP stub.

It runs in the judge process (harness code only), on a port the service's jail relays
to; each request becomes an `httpx.Request` handed to `handler`, whose `httpx.Response`
goes back, so a hidden test describes an upstream as it would for `httpx.MockTransport`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import httpx

__all__ = ["Handler", "StubUpstream", "not_found"]

Handler = Callable[[httpx.Request], httpx.Response]
_MAX_BODY = 1024 * 1024
_HOP_BY_HOP = frozenset({"connection", "content-length", "content-encoding", "transfer-encoding"})


def not_found(request: httpx.Request) -> httpx.Response:
    """The stub's default answer: 404, as for an ISBN nobody knows."""
    return httpx.Response(404, json={"error": "unknown"}, request=request)


class StubUpstream:
    """A threaded HTTP server on 127.0.0.1 answering with `handler`; a context manager."""

    def __init__(self) -> None:
        self.handler: Handler = not_found
        stub = self

        class _Answer(BaseHTTPRequestHandler):
            # Keep-alive: the service's pooled client reuses one connection rather than
            # opening one (and this server a thread) per lookup, whose set-up on a loaded
            # machine could outlast a lookup budget of a few tens of milliseconds. Without
            # Nagle: on a kept connection the body, written after the headers, would wait
            # for the client's delayed ACK (~40 ms a lookup).
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def _answer(self) -> None:
                length = min(int(self.headers.get("content-length") or 0), _MAX_BODY)
                request = httpx.Request(
                    self.command,
                    f"http://127.0.0.1:{stub.port}{self.path}",
                    headers=list(self.headers.items()),
                    content=self.rfile.read(length),
                )
                try:
                    response = stub.handler(request)
                    response.read()
                except Exception as error:  # the test's handler failed: say so to the app
                    response = httpx.Response(599, text=f"stub handler failed: {error!r}")
                self.send_response(response.status_code)
                for key, value in response.headers.multi_items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The stub's loopback port."""
        return int(self._server.server_address[1])

    def reset(self) -> None:
        """Back to answering 404."""
        self.handler = not_found

    def __enter__(self) -> StubUpstream:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
