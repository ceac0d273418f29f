"""The application factory."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from flask import Flask
from werkzeug.exceptions import HTTPException

from . import books, search
from .config import Settings
from .db import init_db
from .metadata import init_metadata
from .metrics import build_instruments, init_metrics
from .validation import InvalidInput

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None, *, upstream_transport: httpx.BaseTransport | None = None
) -> Flask:
    """A configured app; settings default to the environment (`BOOKSHELF_*`)."""
    app = Flask("bookshelf")
    app.config["SETTINGS"] = settings or Settings.from_env()
    app.json.sort_keys = False  # type: ignore[attr-defined]
    instruments = build_instruments()
    init_metrics(app, instruments)
    init_db(app)
    init_metadata(app, instruments, upstream_transport)
    app.register_blueprint(books.bp)
    app.register_blueprint(search.bp)
    _register_errors(app)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _register_errors(app: Flask) -> None:
    @app.errorhandler(InvalidInput)
    def _invalid(exc: InvalidInput) -> tuple[dict[str, Any], int]:
        return {"error": str(exc)}, 400

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[dict[str, Any], int]:
        return {"error": exc.description}, exc.code or 500

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> tuple[dict[str, Any], int]:
        log.exception("unhandled error")
        return {"error": "internal error"}, 500
