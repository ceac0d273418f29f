from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient

from bookshelf import Settings, create_app
from bookshelf.seed import CLASSICS, seed


class StaticMetadataService:
    """Answers like the metadata service for the seeded classics; counts calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.failing = False
        self.known = {isbn: (title, author) for isbn, title, author, _, _ in CLASSICS}

    def handle(self, request: httpx.Request) -> httpx.Response:
        isbn = request.url.path.rsplit("/", 1)[-1]
        self.calls.append(isbn)
        if self.failing:
            return httpx.Response(503, json={"error": "temporarily unavailable"})
        if isbn not in self.known:
            return httpx.Response(404, json={"error": "unknown"})
        title, author = self.known[isbn]
        return httpx.Response(200, json={"isbn": isbn, "title": title, "authors": [author]})


@pytest.fixture
def upstream() -> StaticMetadataService:
    return StaticMetadataService()


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    path = str(tmp_path / "library.db")
    seed(path, 300)
    return path


@pytest.fixture
def app(db_path: str, upstream: StaticMetadataService) -> Iterator[Flask]:
    settings = Settings(db_path=db_path, upstream_url="http://metadata.test")
    yield create_app(settings, upstream_transport=httpx.MockTransport(upstream.handle))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
