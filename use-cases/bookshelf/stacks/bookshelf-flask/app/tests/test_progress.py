from __future__ import annotations

import sqlite3

from flask.testing import FlaskClient

from bookshelf.db import connect


def _latest_page(db_path: str, book_id: int) -> int | None:
    conn = connect(db_path)
    try:
        row = conn.execute(
            "SELECT page FROM reading_progress WHERE book_id = ? "
            "ORDER BY logged_at DESC, id DESC LIMIT 1",
            (book_id,),
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else int(row[0])


def test_search_hits_carry_the_current_page(client: FlaskClient, db_path: str) -> None:
    body = client.get("/search?q=dune").get_json()
    assert body["count"] == 2
    for hit in body["results"]:
        assert hit["current_page"] == _latest_page(db_path, hit["id"])
        assert hit["current_page"] is not None


def test_the_latest_sync_wins(client: FlaskClient, db_path: str) -> None:
    conn = connect(db_path)
    dune = conn.execute("SELECT id FROM books WHERE title = 'Dune'").fetchone()[0]
    conn.execute("INSERT INTO reading_progress (book_id, logged_at, page) "
                 "VALUES (?, '2030-01-01T00:00:00Z', 7)", (dune,))  # fmt: skip
    conn.commit()
    conn.close()
    hit = client.get("/search?q=dune&limit=1").get_json()["results"][0]
    assert hit["id"] == dune
    assert hit["current_page"] == 7


def test_a_book_never_opened_has_no_current_page(client: FlaskClient, db_path: str) -> None:
    conn = connect(db_path)
    cursor = conn.execute(
        "INSERT INTO books (isbn, title, title_key, author, author_key, added_at) "
        "VALUES ('9780000000019', 'Zzyzx Road', 'zzyzx road', 'A', 'a', '2024-01-01T00:00:00Z')"
    )
    conn.commit()
    conn.close()
    hit = client.get("/search?q=zzyzx").get_json()["results"][0]
    assert hit["id"] == cursor.lastrowid
    assert hit["current_page"] is None


def test_deleting_a_book_deletes_its_progress(client: FlaskClient, db_path: str) -> None:
    assert client.delete("/books/1").status_code == 204
    conn: sqlite3.Connection = connect(db_path)
    try:
        left = conn.execute("SELECT COUNT(*) FROM reading_progress WHERE book_id = 1").fetchone()
    finally:
        conn.close()
    assert left[0] == 0
