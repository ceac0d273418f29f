"""The HTTP application: edition lookups, health and metrics."""

from __future__ import annotations

import asyncio
import time

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ._catalogue import CATALOGUE
from ._metrics import build_instruments
from ._pacing import LookupSchedule, Pacing

_LOOKUP = "/v1/books/{isbn}"


def create_app(pacing: Pacing) -> FastAPI:
    """The service for one pacing configuration."""
    schedule = LookupSchedule(pacing)
    metrics = build_instruments()
    app = FastAPI(title="bookmeta", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, object]:
        return {"status": "ok", "editions": len(CATALOGUE)}

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get(_LOOKUP)
    async def lookup(isbn: str) -> Response:
        started = time.perf_counter()
        metrics.inflight.inc()
        try:
            response = await _answer(schedule, isbn)
        finally:
            metrics.inflight.dec()
        metrics.requests.labels(_LOOKUP, str(response.status_code)).inc()
        metrics.duration.labels(_LOOKUP).observe(time.perf_counter() - started)
        return response

    return app


async def _answer(schedule: LookupSchedule, isbn: str) -> Response:
    delay, fails = schedule.next()
    if fails:
        return JSONResponse({"error": "temporarily unavailable"}, status_code=503)
    await asyncio.sleep(delay)
    edition = CATALOGUE.get(isbn)
    if edition is None:
        return JSONResponse({"error": f"no edition with ISBN {isbn}"}, status_code=404)
    return JSONResponse(edition.to_json())


__all__ = ["create_app"]
