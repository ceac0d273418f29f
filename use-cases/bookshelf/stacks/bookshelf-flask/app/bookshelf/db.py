"""SQLite access: a per-request connection and the queries the routes use.

The schema lives in numbered migrations (`bookshelf/migrations/`, applied by
`bookshelf.migrate` when the app or the seed opens the database).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from flask import Flask, current_app, g

from .migrate import migrate

COLUMNS = ("id", "isbn", "title", "author", "published_year", "pages", "status", "rating",
           "added_at")  # fmt: skip
CURRENT_PAGE = (
    "SELECT p.page FROM reading_progress p WHERE p.book_id = books.id "
    "ORDER BY p.logged_at DESC, p.id DESC LIMIT 1"
)
"""The page a book's reader is on: its latest progress entry (a correlated subquery)."""
SORTS = {
    "title": "title_key",
    "author": "author_key",
    "year": "published_year",
    "added": "added_at",
}


def connect(path: str) -> sqlite3.Connection:
    """A connection with the settings every caller wants."""
    conn = sqlite3.connect(path, timeout=5.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def init_schema(conn: sqlite3.Connection) -> None:
    """Bring the schema up to date: apply the migrations this database has not had."""
    migrate(conn)


def get_db() -> sqlite3.Connection:
    """The request's connection, opened on first use and closed at teardown (taken from
    the pool when the library is on PostgreSQL, see `bookshelf.postgres`)."""
    if "db" not in g:
        pool = current_app.extensions.get("bookshelf.postgres")
        g.db = connect(current_app.config["SETTINGS"].db_path) if pool is None else pool.checkout()
    conn: sqlite3.Connection = g.db
    return conn


def init_db(app: Flask) -> None:
    """Migrate the schema and close request connections at teardown."""
    from .postgres import init_postgres  # imported here: psycopg loads only when the app starts

    if not init_postgres(app):
        with connect(app.config["SETTINGS"].db_path) as conn:
            init_schema(conn)

    @app.teardown_appcontext
    def _close(_exc: BaseException | None) -> None:
        conn = g.pop("db", None)
        if conn is not None:
            conn.close()


def row_to_book(row: sqlite3.Row) -> dict[str, Any]:
    """The public JSON shape of a book row."""
    return {name: row[name] for name in COLUMNS}


def list_books(
    conn: sqlite3.Connection, sort: str, descending: bool, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """One page of books in the requested order, and the total count."""
    column = SORTS[sort]
    direction = "DESC" if descending else "ASC"
    rows = conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM books "
        f"ORDER BY {column} {direction}, id {direction} LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    total = conn.execute("SELECT COUNT(*) FROM books").fetchone()[0]
    return [row_to_book(row) for row in rows], int(total)


def find_by_title_prefix(conn: sqlite3.Connection, prefix: str, limit: int) -> list[dict[str, Any]]:
    """Books whose title starts with `prefix` (case-insensitive), title order, each with
    `current_page`: the page of its latest reading-progress entry (None if never read)."""
    key = prefix.lower()
    rows = conn.execute(
        f"SELECT {', '.join(COLUMNS)}, ({CURRENT_PAGE}) AS current_page FROM books "
        "WHERE title_key >= ? AND title_key < ? ORDER BY title_key, id LIMIT ?",
        (key, key + "\uffff", limit),
    ).fetchall()
    return [{**row_to_book(row), "current_page": row["current_page"]} for row in rows]


def get_book(conn: sqlite3.Connection, book_id: int) -> dict[str, Any] | None:
    """The book with this id, if any."""
    row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM books WHERE id = ?", (book_id,))
    found = row.fetchone()
    return None if found is None else row_to_book(found)
