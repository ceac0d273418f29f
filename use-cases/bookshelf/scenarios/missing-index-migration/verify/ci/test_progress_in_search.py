"""Search hits carry the reader's current page, and the schema migrates cleanly.

Hidden from the workspace: CI copies this folder under a fresh name into the tests and
runs it against the submitted code, with the hand-off commit's test configuration.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from bookshelf import Settings, create_app
from bookshelf.db import connect
from bookshelf.seed import seed
from flask.testing import FlaskClient


@pytest.fixture
def library(tmp_path: Path) -> str:
    path = str(tmp_path / "hidden-library.db")
    seed(path, 400, 5, 12)
    return path


@pytest.fixture
def api(library: str) -> FlaskClient:
    settings = Settings(db_path=library, upstream_url="http://registry.invalid")
    transport = httpx.MockTransport(lambda request: httpx.Response(404))
    return create_app(settings, upstream_transport=transport).test_client()


def _latest(library: str, book_id: int) -> int | None:
    conn = connect(library)
    try:
        row = conn.execute(
            "SELECT page FROM reading_progress WHERE book_id = ? "
            "ORDER BY logged_at DESC, id DESC LIMIT 1",
            (book_id,),
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else int(row[0])


@pytest.mark.parametrize("query", ["Hyperi", "FOUNDATION A", "middlem", "the left h"])
def test_every_hit_carries_its_latest_page(api: FlaskClient, library: str, query: str) -> None:
    """`current_page` is the page of the book's latest sync, on every hit."""
    answer = api.get("/search", query_string={"q": query, "limit": "3"})
    assert answer.status_code == 200
    hits = answer.get_json()["results"]
    assert hits
    for hit in hits:
        assert hit["current_page"] == _latest(library, hit["id"])
        assert hit["current_page"] is not None


def test_a_new_library_migrates_once(tmp_path: Path) -> None:
    """The app starts on an empty file, and starting it again changes nothing."""
    path = str(tmp_path / "hidden-empty.db")
    for _ in range(2):
        settings = Settings(db_path=path, upstream_url="http://registry.invalid")
        create_app(settings, upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    conn = sqlite3.connect(path)
    try:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert versions == sorted(set(versions))
    assert {"books", "reading_progress", "schema_migrations"} <= tables


def test_listing_and_lookup_are_unchanged(api: FlaskClient) -> None:
    """Pages of the library and single books answer as before."""
    page = api.get("/books?sort=title&per_page=4&page=2").get_json()
    assert page["total"] == 400
    assert len(page["items"]) == 4
    book = api.get(f"/books/{page['items'][0]['id']}").get_json()
    assert book == page["items"][0]
