"""The model proxy: a host-side HTTP relay that keeps the real key out of the sandbox.

A CLI agent (on by default for the presets, see `_presets`) talks to
`http://127.0.0.1:<port>/...` with a per-session access token as its "key". The
proxy checks that token, forwards the call to the upstream with the real key
(the profile's first credential route), streams the answer back unchanged (SSE
included), and logs every call to `model-calls.jsonl`: time, method, path,
model, status, latency, sizes, token usage (raw and as tokens in/out), and the
request and response bodies capped (64 KB each, and 24 MB over the session: later
calls are logged without bodies, `bodies_dropped` says so). Refused calls are
logged too, with their status and `error`: a wrong or missing token (401, with
`credential` naming the headers the call carried, never their values), an upgrade
(501), an unreachable upstream (502). The key and the token are replaced by
`[REDACTED:<NAME>]` in every line before it is written. Flavors: `openai` (Bearer),
`anthropic` (`x-api-key`) and `gemini` (`x-goog-api-key`; a `?key=` in the URL
is accepted from the agent and never forwarded or logged). It listens on
loopback only; the token stops other local processes using it. WebSocket
upgrades are refused (answered 501) so a client falls back to plain HTTP.
"""

from __future__ import annotations

import hmac
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
from urllib.parse import parse_qsl, urlencode, urlsplit

from sreforge_runner._pricing import tokens_of
from sreforge_runner._transcript import redact

__all__ = ["PROXY_TOKEN_NAME", "ModelProxy", "ProxyFlavor", "usage_of"]

ProxyFlavor = Literal["openai", "anthropic", "gemini"]
_BODY_CAP = 65_536
_BODY_BUDGET = 24_000_000
_REFUSED_BODY_CAP = 1_048_576  # what a refused call may send before its answer
PROXY_TOKEN_NAME = "MODEL_PROXY_TOKEN"
"""How the proxy's token reads where it was redacted."""
_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
_SCAN_CAP = 16 * 1024 * 1024  # a non-streamed answer is parsed for usage up to this size
_UPSTREAM_TIMEOUT_S = 600.0
_DROP = {
    "host",
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "content-length",
    "transfer-encoding",
    "connection",
    "accept-encoding",
    "upgrade",
}
_HOP = {"transfer-encoding", "connection", "content-length", "keep-alive"}
_KEY_HEADER: dict[ProxyFlavor, str] = {"anthropic": "x-api-key", "gemini": "x-goog-api-key"}


@dataclass
class ModelProxy:
    """One session's proxy; `start()` returns its base URL, `close()` stops it."""

    flavor: ProxyFlavor
    upstream: str
    key: str | None
    log_path: Path
    key_name: str = "MODEL_KEY"
    """The key's variable name, as it reads where it was redacted."""
    token: str = field(default_factory=lambda: f"sk-proxy-{secrets.token_hex(16)}")
    calls: int = field(default=0, init=False)
    body_bytes: int = field(default=0, init=False)
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

    def authorised(self, headers: Any, query_key: str | None = None) -> bool:
        """True when the call carries this session's token (any flavor's header, or `?key=`)."""
        bearer = str(headers.get("Authorization", "")).removeprefix("Bearer ").strip()
        given = (
            headers.get("x-api-key"),
            headers.get("x-goog-api-key"),
            bearer,
            query_key,
        )
        token = self.token.encode()
        return any(hmac.compare_digest(str(value).encode(), token) for value in given if value)

    def upstream_headers(self, headers: Any) -> dict[str, str]:
        """The caller's headers minus its credentials, plus the real key."""
        out = {k: v for k, v in headers.items() if k.lower() not in _DROP}
        if self.key:
            if self.flavor in _KEY_HEADER:
                out[_KEY_HEADER[self.flavor]] = self.key
            else:
                out["Authorization"] = f"Bearer {self.key}"
        return out

    def secrets(self) -> dict[str, str]:
        """The values never to be written anywhere: the token and the real key."""
        found = {PROXY_TOKEN_NAME: self.token}
        if self.key:
            found[self.key_name] = self.key
        return found

    def log(self, entry: dict[str, Any]) -> None:
        """Append one call to the log (thread-safe), redacted, bodies within the budget."""
        with self._lock:
            self.calls += 1
            entry["call"] = self.calls
            bodies = len(entry.get("request") or "") + len(entry.get("response") or "")
            if self.body_bytes + bodies > _BODY_BUDGET:
                entry.update(request=None, response=None, bodies_dropped="over the log's budget")
            else:
                self.body_bytes += bodies
            line, _ = redact(json.dumps(entry), self.secrets())
            with self.log_path.open("a") as log:
                log.write(line + "\n")


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
        path, query_key = _without_key(self.path)
        started = time.monotonic()
        if not proxy.authorised(self.headers, query_key):
            body = self._body(_REFUSED_BODY_CAP)
            error = "not this session's proxy token"
            entry = _entry(self, path, body, 401, UsageMeter(), started, error=error)
            entry["credential"] = _credentials(self.headers, query_key)
            # logged before the answer: a caller that saw its refusal finds it in the log
            proxy.log(entry)
            self.send_error(401, error)
            return
        body = self._body()
        if "websocket" in self.headers.get("Upgrade", "").lower():
            error = "the model proxy relays plain HTTP only (no upgrade)"
            proxy.log(_entry(self, path, body, 501, UsageMeter(), started, error=error))
            self.send_error(501, error)
            return
        target = urlsplit(proxy.upstream)
        connection = _connect(target.scheme, target.netloc)
        answer: http.client.HTTPResponse | None = None
        failed: str | None = None
        try:
            connection.request(
                self.command, path, body=body, headers=proxy.upstream_headers(self.headers)
            )
            answer = connection.getresponse()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            self.end_headers()
            meter = self._stream(answer)
        except (OSError, http.client.HTTPException) as error:
            failed = f"upstream {target.netloc}: {type(error).__name__}"
            meter, status = UsageMeter(), 502 if answer is None else answer.status
        else:
            status = answer.status
        finally:
            connection.close()
        proxy.log(_entry(self, path, body, status, meter, started, error=failed))
        if answer is None:
            self.send_error(502, failed)

    def _body(self, cap: int | None = None) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            length = max(int(self.headers.get("Content-Length", "0") or 0), 0)
            return self.rfile.read(length if cap is None else min(length, cap))
        body = bytearray()
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            body += self.rfile.read(size)
            self.rfile.readline()
            if cap is not None and len(body) >= cap:
                return bytes(body[:cap])
        while self.rfile.readline().strip():  # trailers
            continue
        return bytes(body)

    def _stream(self, answer: http.client.HTTPResponse) -> UsageMeter:
        meter = UsageMeter()
        while chunk := answer.read1(65_536):
            self.wfile.write(chunk)
            self.wfile.flush()
            meter.feed(chunk)
        return meter


@dataclass
class UsageMeter:
    """Reads an answer as it streams: its size, its head (for the log), and its usage
    from every SSE `data:` line (the final counts come last, past any head cap) or, for
    a plain JSON answer, from the whole document."""

    size: int = 0
    head: bytearray = field(default_factory=bytearray)
    found: dict[str, int] = field(default_factory=dict)
    _line: bytearray = field(default_factory=bytearray)
    _whole: bytearray | None = field(default_factory=bytearray)
    _sse: bool = False

    def feed(self, chunk: bytes) -> None:
        """Take the next piece of the answer."""
        self.size += len(chunk)
        if len(self.head) < _BODY_CAP:
            self.head += chunk[: _BODY_CAP - len(self.head)]
        if self._whole is not None:
            self._whole += chunk
            if len(self._whole) > _SCAN_CAP:
                self._whole = None
        if len(self._line) < _SCAN_CAP:
            self._line += chunk
        if b"\n" in chunk:
            *lines, rest = self._line.split(b"\n")
            self._line = bytearray(rest)
            for line in lines:
                self._scan(bytes(line))

    def usage(self) -> dict[str, int] | None:
        """The merged usage (cumulative counts keep their max), None if the answer had none."""
        self._scan(bytes(self._line))
        self._line.clear()
        if not self._sse and self._whole is not None:
            whole = _json(bytes(self._whole))
            for document in whole if isinstance(whole, list) else [whole]:
                self._merge(document)
        return dict(self.found) or None

    def _scan(self, line: bytes) -> None:
        if line.startswith(b"data:"):
            self._sse = True
            if b"sage" in line:  # usage / usageMetadata; skips the many delta events
                self._merge(_json(line[5:]))

    def _merge(self, document: Any) -> None:
        for usage in _usages(document):
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.found[key] = max(self.found.get(key, 0), value)


def _connect(scheme: str, netloc: str) -> http.client.HTTPConnection:
    if scheme == "https":
        return http.client.HTTPSConnection(netloc, timeout=_UPSTREAM_TIMEOUT_S)
    return http.client.HTTPConnection(netloc, timeout=_UPSTREAM_TIMEOUT_S)


def _without_key(path: str) -> tuple[str, str | None]:
    """The request path without a `key` query parameter, and that parameter's value."""
    parts = urlsplit(path)
    query = parse_qsl(parts.query, keep_blank_values=True)
    keys = [value for name, value in query if name == "key"]
    if not keys:
        return path, None
    rest = urlencode([(name, value) for name, value in query if name != "key"])
    return parts.path + (f"?{rest}" if rest else ""), keys[0]


def _credentials(headers: Any, query_key: str | None) -> list[str]:
    """The names of the credentials a call carried (never their values)."""
    names = [name for name in _CREDENTIAL_HEADERS if headers.get(name)]
    return [*names, "?key="] if query_key else names


def _entry(
    handler: _Relay,
    path: str,
    body: bytes,
    status: int,
    meter: UsageMeter,
    started: float,
    *,
    error: str | None = None,
) -> dict[str, Any]:
    request = _json(body)
    usage = meter.usage()
    tokens = tokens_of(usage)
    extra = {"error": error} if error else {}
    return {
        "t": datetime.now(UTC).isoformat(),
        "method": handler.command,
        "path": path,
        "model": _model(request, path),
        "status": status,
        "latency_s": round(time.monotonic() - started, 4),
        "request_bytes": len(body),
        "response_bytes": meter.size,
        "usage": usage,
        "tokens_in": tokens[0] if tokens else None,
        "tokens_out": tokens[1] if tokens else None,
        "request": body[:_BODY_CAP].decode(errors="replace"),
        "response": bytes(meter.head).decode(errors="replace"),
        **extra,
    }


def _model(request: Any, path: str) -> str | None:
    """The model named in the request body, else in a Gemini path (`/models/<m>:<verb>`)."""
    if isinstance(request, dict) and isinstance(request.get("model"), str):
        return str(request["model"])
    _, found, rest = urlsplit(path).path.partition("/models/")
    model = rest.split(":", 1)[0]
    return model if found and model else None


def usage_of(body: bytes) -> dict[str, int] | None:
    """Token usage from a JSON answer, a JSON array of chunks or an SSE stream (OpenAI
    chat and responses, Anthropic and Gemini shapes); cumulative counts keep their max."""
    meter = UsageMeter()
    meter.feed(body)
    return meter.usage()


def _usages(document: Any) -> list[dict[str, Any]]:
    if not isinstance(document, dict):
        return []
    candidates = [document.get("usage"), document.get("usageMetadata")]
    for wrapper in ("message", "response"):  # Anthropic message_start, OpenAI responses
        inner = document.get(wrapper)
        if isinstance(inner, dict):
            candidates.append(inner.get("usage"))
    return [usage for usage in candidates if isinstance(usage, dict)]


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None
