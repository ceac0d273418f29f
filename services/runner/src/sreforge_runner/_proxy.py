"""The model proxy: a host-side HTTP relay that keeps the real key out of the sandbox.

A CLI agent whose profile sets `metadata.proxy = "openai" | "anthropic"` and
`metadata.upstream = <provider base URL>` talks to `http://127.0.0.1:<port>/...`
with a per-session access token as its "key". The proxy checks that token,
forwards the call to the upstream with the real key (the profile's first
credential route), streams the answer back unchanged (SSE included), and logs
every call to `model-calls.jsonl`: time, method, path, model, status, latency,
sizes, token usage, and the request and response bodies capped (never a key).
It listens on loopback only; the token stops other local processes using it.
"""

from __future__ import annotations

import http.client
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["ModelProxy", "ProxyFlavor", "usage_of"]

ProxyFlavor = Literal["openai", "anthropic"]
_BODY_CAP = 65_536
_UPSTREAM_TIMEOUT_S = 600.0
_DROP = {"host", "authorization", "x-api-key", "content-length", "connection", "accept-encoding"}
_HOP = {"transfer-encoding", "connection", "content-length", "keep-alive"}


@dataclass
class ModelProxy:
    """One session's proxy; `start()` returns its base URL, `close()` stops it."""

    flavor: ProxyFlavor
    upstream: str
    key: str | None
    log_path: Path
    token: str = field(default_factory=lambda: f"sreforge-{secrets.token_hex(16)}")
    calls: int = field(default=0, init=False)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def start(self) -> str:
        """Listen on 127.0.0.1 (a free port) and return the base URL the agent uses."""
        proxy = self

        class Handler(_Relay):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}{urlsplit(self.upstream).path.rstrip('/')}"

    def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def authorised(self, headers: Any) -> bool:
        """True when the call carries this session's token."""
        given = str(headers.get("x-api-key", "")) + " " + str(headers.get("Authorization", ""))
        return self.token in given

    def upstream_headers(self, headers: Any) -> dict[str, str]:
        """The caller's headers minus its credentials, plus the real key."""
        out = {k: v for k, v in headers.items() if k.lower() not in _DROP}
        if self.key:
            if self.flavor == "anthropic":
                out["x-api-key"] = self.key
            else:
                out["Authorization"] = f"Bearer {self.key}"
        return out

    def log(self, entry: dict[str, Any]) -> None:
        """Append one call to the log (thread-safe)."""
        with self._lock:
            self.calls += 1
            entry["call"] = self.calls
            with self.log_path.open("a") as log:
                log.write(json.dumps(entry) + "\n")


class _Relay(BaseHTTPRequestHandler):
    owner: ModelProxy
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: SSE streams as is

    def log_message(self, *args: Any) -> None:
        """Calls are logged to the session's model-call log instead."""

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def _relay(self) -> None:
        proxy = self.owner
        if not proxy.authorised(self.headers):
            self.send_error(401, "not this session's proxy token")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        target = urlsplit(proxy.upstream)
        started = time.monotonic()
        connection = _connect(target.scheme, target.netloc)
        try:
            connection.request(
                self.command, self.path, body=body, headers=proxy.upstream_headers(self.headers)
            )
            answer = connection.getresponse()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            self.end_headers()
            kept, size = self._stream(answer)
        except (OSError, http.client.HTTPException) as error:
            self.send_error(502, f"upstream {target.netloc}: {type(error).__name__}")
            kept, size, answer = b"", 0, None
        finally:
            connection.close()
        proxy.log(_entry(self, body, answer.status if answer else 502, kept, size, started))

    def _stream(self, answer: http.client.HTTPResponse) -> tuple[bytes, int]:
        kept, size = bytearray(), 0
        while chunk := answer.read1(65_536):
            self.wfile.write(chunk)
            self.wfile.flush()
            size += len(chunk)
            if len(kept) < _BODY_CAP:
                kept += chunk[: _BODY_CAP - len(kept)]
        return bytes(kept), size


def _connect(scheme: str, netloc: str) -> http.client.HTTPConnection:
    if scheme == "https":
        return http.client.HTTPSConnection(netloc, timeout=_UPSTREAM_TIMEOUT_S)
    return http.client.HTTPConnection(netloc, timeout=_UPSTREAM_TIMEOUT_S)


def _entry(
    handler: _Relay, body: bytes, status: int, kept: bytes, size: int, started: float
) -> dict[str, Any]:
    request = _json(body)
    return {
        "t": datetime.now(UTC).isoformat(),
        "method": handler.command,
        "path": handler.path,
        "model": request.get("model") if isinstance(request, dict) else None,
        "status": status,
        "latency_s": round(time.monotonic() - started, 4),
        "request_bytes": len(body),
        "response_bytes": size,
        "usage": usage_of(kept),
        "request": body[:_BODY_CAP].decode(errors="replace"),
        "response": kept.decode(errors="replace"),
    }


def usage_of(body: bytes) -> dict[str, int] | None:
    """Token usage from a JSON answer or an SSE stream (OpenAI and Anthropic shapes)."""
    found: dict[str, int] = {}
    documents = [_json(body)]
    if not isinstance(documents[0], dict):
        documents = [_json(line[5:]) for line in body.splitlines() if line.startswith(b"data:")]
    for document in documents:
        if not isinstance(document, dict):
            continue
        message = document.get("message")
        nested = message.get("usage") if isinstance(message, dict) else None
        for usage in (document.get("usage"), nested):
            if isinstance(usage, dict):
                for key, value in usage.items():
                    if isinstance(value, int):
                        found[key] = max(found.get(key, 0), value)
    return found or None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None
