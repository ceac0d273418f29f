"""The HTTP receiver: Alertmanager webhooks and feed signals in, acknowledged events out."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Path, Request
from fastapi.responses import JSONResponse
from pydantic import SecretStr

from sreforge_trigger._body import read_body
from sreforge_trigger._errors import BodyTooLarge, PayloadError, PublishFailed
from sreforge_trigger._feed import feed_event, parse_feed
from sreforge_trigger._ingest import Ingest, IngestResult, Publish
from sreforge_trigger._settings import TriggerSettings
from sreforge_trigger._webhook import ALERTMANAGER_SOURCE, parse_webhook, webhook_events

__all__ = ["ROUTE_PATTERN", "create_app"]

ROUTE_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

RouteToken = Annotated[str, Path(pattern=ROUTE_PATTERN, description="opaque per-run route")]


class _Unauthorized(Exception):
    """Missing or wrong bearer token (the message never contains the token)."""


def create_app(
    publish: Publish, settings: TriggerSettings, *, token: SecretStr | None = None
) -> FastAPI:
    """The trigger's FastAPI app; `publish` stores one event and awaits JetStream's ack.

    `token` defaults to `settings.bearer_token()` (read once, here).
    """
    expected = (token or settings.bearer_token()).get_secret_value().encode()
    ingest = Ingest(publish, timeout=settings.publish_timeout, memory=settings.dedupe_size)

    async def authorized(authorization: Annotated[str | None, Header()] = None) -> None:
        scheme, _, given = (authorization or "").partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected)
        if not ok:
            raise _Unauthorized("missing or wrong bearer token")

    app = FastAPI(title="sreforge-trigger", docs_url=None, redoc_url=None, openapi_url=None)
    auth = [Depends(authorized)]

    @app.post("/v1/alertmanager/{route}", dependencies=auth)
    async def alertmanager(route: RouteToken, request: Request) -> JSONResponse:
        payload = parse_webhook(await read_body(request, settings.max_body_bytes))
        result = await ingest.deliver(webhook_events(payload, route), ALERTMANAGER_SOURCE)
        return _accepted(result, truncated_alerts=payload.truncated_alerts)

    @app.post("/v1/feed/{route}", dependencies=auth)
    async def feed(route: RouteToken, request: Request) -> JSONResponse:
        signal = parse_feed(await read_body(request, settings.max_body_bytes), route)
        result = await ingest.deliver([feed_event(signal, route)], signal.source)
        return _accepted(result)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    _add_error_handlers(app)
    return app


def _accepted(result: IngestResult, *, truncated_alerts: int = 0) -> JSONResponse:
    body: dict[str, object] = {
        "status": "accepted",
        "events": list(result.event_ids),
        "published": result.published,
        "duplicates": result.duplicates,
    }
    if truncated_alerts:
        body["truncated_alerts"] = truncated_alerts
    return JSONResponse(body)


def _add_error_handlers(app: FastAPI) -> None:
    async def unauthorized(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": str(error)}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )

    async def bad_payload(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, PayloadError)
        status = 400 if error.malformed else 422
        return JSONResponse({"error": str(error), "field": error.field}, status_code=status)

    async def too_large(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, BodyTooLarge)
        # The body was drained (up to DRAIN_BYTES) so the sender can read this; close anyway.
        return JSONResponse(
            {"error": str(error), "limit_bytes": error.limit},
            status_code=413,
            headers={"Connection": "close"},
        )

    async def bus_down(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=503, headers={"Retry-After": "1"})

    app.add_exception_handler(_Unauthorized, unauthorized)
    app.add_exception_handler(PayloadError, bad_payload)
    app.add_exception_handler(BodyTooLarge, too_large)
    app.add_exception_handler(PublishFailed, bus_down)
