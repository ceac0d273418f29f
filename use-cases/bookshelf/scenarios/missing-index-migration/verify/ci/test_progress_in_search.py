"""Search hits carry the reader's current page, and the schema migrates cleanly.

Hidden from the workspace: the CI gate's judge runs these in a process of its own against
the submitted service, freshly seeded and started for each test (`service`, `serve`),
over HTTP; `service_db` is the service's data file, read here after it answered.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from sreforge_deployer.judging import Serve


def _rows(db: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


def _latest(db: Path, book_id: int) -> int | None:
    rows = _rows(
        db,
        "SELECT page FROM reading_progress WHERE book_id = ? "
        "ORDER BY logged_at DESC, id DESC LIMIT 1",
        book_id,
    )
    return None if not rows else int(str(rows[0][0]))


@pytest.mark.parametrize("query", ["Hyperi", "FOUNDATION A", "middlem", "the left h"])
def test_every_hit_carries_its_latest_page(
    service: httpx.Client, service_db: Path, query: str
) -> None:
    """`current_page` is the page of the book's latest sync, on every hit."""
    answer = service.get("/search", params={"q": query, "limit": "3"})
    assert answer.status_code == 200
    hits = answer.json()["results"]
    assert hits
    for hit in hits:
        assert hit["current_page"] == _latest(service_db, hit["id"])
        assert hit["current_page"] is not None


def test_a_new_library_migrates_once(serve: Serve, service_db: Path) -> None:
    """The app starts on an empty folder, and starting it again changes nothing."""
    serve(data="empty")
    serve(data="kept")
    versions = [row[0] for row in _rows(service_db, "SELECT version FROM schema_migrations")]
    tables = {row[0] for row in _rows(service_db, "SELECT name FROM sqlite_master")}
    assert versions
    assert versions == sorted(set(versions))  # type: ignore[type-var]
    assert {"books", "reading_progress", "schema_migrations"} <= tables


def test_listing_and_lookup_are_unchanged(service: httpx.Client, service_db: Path) -> None:
    """Pages of the library and single books answer as before."""
    page = service.get("/books?sort=title&per_page=4&page=2").json()
    assert page["total"] == _rows(service_db, "SELECT COUNT(*) FROM books")[0][0]
    assert len(page["items"]) == 4
    book = service.get(f"/books/{page['items'][0]['id']}").json()
    assert book == page["items"][0]
