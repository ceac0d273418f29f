"""The control and metrics endpoints, as a plain ASGI app."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ._generator import LoadGenerator

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def control_app(generator: LoadGenerator) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """GET /healthz /metrics /status; POST /pause /resume /warmup."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        route = (scope["method"], scope["path"])
        if route == ("GET", "/metrics"):
            body = generate_latest(generator.metrics.registry)
            await _reply(send, 200, body, CONTENT_TYPE_LATEST)
        elif route == ("GET", "/healthz"):
            await _json(send, 200, {"status": "ok"})
        elif route == ("GET", "/status"):
            await _json(send, 200, _status(generator))
        elif route == ("POST", "/pause"):
            generator.pause()
            await _json(send, 200, _status(generator))
        elif route == ("POST", "/resume"):
            generator.resume()
            await _json(send, 200, _status(generator))
        elif route == ("POST", "/warmup"):
            report = await generator.warmup()
            await _json(send, 200, {"requests": report.requests, "ok": report.ok,
                                    "seconds": report.seconds})  # fmt: skip
        else:
            await _json(send, 404, {"error": f"no route {scope['method']} {scope['path']}"})

    return app


def _status(generator: LoadGenerator) -> dict[str, object]:
    return {
        "profile": generator.profile.name,
        "target_rps": generator.rate,
        "achieved_rps": round(generator.window.rate(), 3),
        "paused": generator.paused,
    }


async def _json(send: Send, status: int, payload: dict[str, object]) -> None:
    await _reply(send, status, json.dumps(payload).encode(), "application/json")


async def _reply(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
