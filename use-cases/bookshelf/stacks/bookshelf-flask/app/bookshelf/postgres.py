"""PostgreSQL storage: a connection pool, and connections shaped like the SQLite ones.

With `BOOKSHELF_DATABASE_URL` set (a libpq connection string) the app keeps its library
in PostgreSQL instead of the SQLite file: `db.get_db()` checks a connection out of a pool
of `BOOKSHELF_DB_POOL_SIZE` connections (default 20), waiting at most
`BOOKSHELF_DB_POOL_TIMEOUT_SECONDS` (default 5) for a free one, and gives it back when
the request ends. The routes keep their SQL: a `PostgresConnection` takes `?`
parameters, returns rows by position and by column name, reports `lastrowid` and raises
`sqlite3.IntegrityError` for a constraint violation, as `sqlite3` does.

The schema is the numbered files in `bookshelf/migrations/postgres/`, applied at start-up
like the SQLite ones. `python -m bookshelf.postgres --database-url URL --from-sqlite PATH`
copies a library written by `bookshelf.seed` into the database (same rows, same ids).
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from flask import Flask
from psycopg import conninfo
from psycopg_pool import ConnectionPool

from .migrate import available

log = logging.getLogger(__name__)

EXTENSION = "bookshelf.postgres"
"""Where the app keeps its `PostgresPool` (`app.extensions`)."""
DEFAULT_POOL_SIZE = 20
MIGRATIONS = "bookshelf.migrations.postgres"
_MIGRATIONS_LOCK = 7_340_113  # any constant: serializes concurrent start-ups' migrations
_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""
_COPIED = {
    "books": ("id", "isbn", "title", "title_key", "author", "author_key", "published_year",
              "pages", "status", "rating", "added_at"),
    "reading_progress": ("id", "book_id", "logged_at", "page", "device"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """Where the database is and how many connections the service may hold."""

    url: str
    pool_size: int = DEFAULT_POOL_SIZE
    pool_timeout_seconds: float = 5.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> PostgresSettings | None:
        """Settings from `BOOKSHELF_DATABASE_URL` and friends; None when it is unset."""
        url = environ.get("BOOKSHELF_DATABASE_URL", "")
        if not url:
            return None
        size = environ.get("BOOKSHELF_DB_POOL_SIZE") or str(DEFAULT_POOL_SIZE)
        if not size.isdigit() or int(size) < 1:
            raise ValueError(f"BOOKSHELF_DB_POOL_SIZE must be a positive integer, got {size!r}")
        timeout = environ.get("BOOKSHELF_DB_POOL_TIMEOUT_SECONDS") or "5"
        try:
            seconds = float(timeout)
        except ValueError:
            seconds = 0.0
        if seconds <= 0:
            raise ValueError(
                f"BOOKSHELF_DB_POOL_TIMEOUT_SECONDS must be a positive number, got {timeout!r}"
            )
        return cls(url=url, pool_size=int(size), pool_timeout_seconds=seconds)

    @property
    def where(self) -> str:
        """`host:port/dbname`, for logs (never the whole connection string)."""
        parts = conninfo.conninfo_to_dict(self.url)
        return f"{parts.get('host', '')}:{parts.get('port', '5432')}/{parts.get('dbname', '')}"


class Row(tuple[Any, ...]):
    """A result row, by position (`row[0]`) or by column name (`row["title"]`)."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._index[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._index)


def _rows(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    names = [column.name for column in cursor.description or ()]
    index = {name: position for position, name in enumerate(names)}
    return lambda values: Row(values, index)


class PostgresCursor:
    """The result of one statement: rows, and the id an INSERT gave its row."""

    def __init__(self, cursor: psycopg.Cursor[Any], lastrowid: int | None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Row | None:
        """The next row, if any."""
        row: Row | None = self._cursor.fetchone()
        return row

    def fetchall(self) -> list[Row]:
        """Every remaining row."""
        rows: list[Row] = self._cursor.fetchall()
        return rows

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


class PostgresConnection:
    """A pooled connection that runs the routes' SQLite-style statements.

    Each statement commits on its own (autocommit), so `commit()` has nothing left to
    do; `close()` gives the connection back to the pool.
    """

    def __init__(self, pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
        self._pool = pool
        self._conn: psycopg.Connection[Any] | None = conn

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> PostgresCursor:
        """Run one statement with `?` parameters."""
        statement = sql.replace("%", "%%").replace("?", "%s")
        inserts = statement.lstrip().upper().startswith("INSERT")
        if inserts and "RETURNING" not in statement.upper():
            statement += " RETURNING id"
        try:
            cursor = self._open().execute(statement, tuple(parameters))
        except psycopg.IntegrityError as error:
            raise sqlite3.IntegrityError(str(error).strip()) from error
        lastrowid = None
        if inserts and cursor.description is not None:
            row = cursor.fetchone()
            lastrowid = None if row is None else int(row[0])
        return PostgresCursor(cursor, lastrowid)

    def commit(self) -> None:
        """Nothing to do: every statement has committed already."""

    def rollback(self) -> None:
        """Nothing to do: no statement is left open."""

    def close(self) -> None:
        """Give the connection back to the pool (once)."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            self._pool.putconn(conn)

    def _open(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return self._conn


class PostgresPool:
    """The service's connections to PostgreSQL."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.pool = ConnectionPool(
            settings.url,
            min_size=settings.pool_size,
            max_size=settings.pool_size,
            timeout=settings.pool_timeout_seconds,
            kwargs={"autocommit": True, "row_factory": _rows},
            name="bookshelf",
            open=False,
        )

    def open(self, timeout_seconds: float = 30.0) -> None:
        """Connect the pool; raise if the database does not answer within the timeout."""
        self.pool.open(wait=True, timeout=timeout_seconds)

    def checkout(self) -> PostgresConnection:
        """A free connection, waiting up to the pool timeout for one (`PoolTimeout`)."""
        return PostgresConnection(self.pool, self.pool.getconn())

    def close(self) -> None:
        """Close every connection."""
        self.pool.close()


def init_postgres(app: Flask, environ: Mapping[str, str] = os.environ) -> bool:
    """Open the pool and migrate the schema if the app runs on PostgreSQL; whether it does."""
    settings = PostgresSettings.from_env(environ)
    if settings is None:
        return False
    pool = PostgresPool(settings)
    pool.open()
    with pool.pool.connection() as conn:
        ran = migrate(conn)
    log.info(
        "library on postgres %s, pool of %d (migrations applied: %s)",
        settings.where,
        settings.pool_size,
        ", ".join(ran) or "none pending",
    )
    app.extensions[EXTENSION] = pool
    return True


def migrate(conn: psycopg.Connection[Any]) -> list[str]:
    """Apply every pending PostgreSQL migration in order; return the versions applied now."""
    ran = []
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATIONS_LOCK,))
        conn.execute(_TABLE)
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for migration in available(MIGRATIONS):
            if migration.version in done:
                continue
            conn.execute(migration.sql.encode())
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.version, migration.name, stamp),
            )
            ran.append(migration.version)
    return ran


def load_library(conn: psycopg.Connection[Any], sqlite_path: str) -> int:
    """Replace the library with the one in the SQLite file at `sqlite_path`; return the
    number of books."""
    source = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        with conn.transaction():
            conn.execute("TRUNCATE reading_progress, books")
            for table, columns in _COPIED.items():
                names = ", ".join(columns)
                with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                    for chunk in _copy_text(source, table, columns):
                        copy.write(chunk)
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
                )
        conn.execute("ANALYZE")
        row = conn.execute("SELECT COUNT(*) FROM books").fetchone()
        return 0 if row is None else int(row[0])
    finally:
        source.close()


def _copy_text(
    source: sqlite3.Connection, table: str, columns: tuple[str, ...], rows_per_chunk: int = 50_000
) -> Iterator[str]:
    """The table's rows as COPY text, in chunks; SQLite formats each line (1M rows in ~2 s,
    where row-by-row Python takes ~15 s)."""
    fields = " || char(9) || ".join(f"{_copy_field(column)}" for column in columns)
    cursor = source.execute(f"SELECT {fields} FROM {table} ORDER BY id")
    while lines := cursor.fetchmany(rows_per_chunk):
        yield "".join(f"{line}\n" for (line,) in lines)


def _copy_field(column: str) -> str:
    # COPY's text format: NULL as \N; backslash, tab, newline and return escaped (the
    # backslash first). SQLite's string literals have no escapes: '\' is one backslash.
    escaped = column
    for code, letter in ((92, "\\"), (9, "t"), (10, "n"), (13, "r")):
        escaped = f"replace({escaped}, char({code}), '\\{letter}')"
    return f"COALESCE({escaped}, '\\N')"


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: migrate the database, then copy a seeded library into it."""
    parser = argparse.ArgumentParser(prog="python -m bookshelf.postgres", description=__doc__)
    parser.add_argument("--database-url", default=os.environ.get("BOOKSHELF_DATABASE_URL"))
    parser.add_argument("--from-sqlite", required=True, help="library written by bookshelf.seed")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("--database-url (or BOOKSHELF_DATABASE_URL) is required")
    started = time.perf_counter()
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        migrate(conn)
        total = load_library(conn, args.from_sqlite)
    where = PostgresSettings(url=args.database_url).where
    print(f"loaded {total} books into {where} in {time.perf_counter() - started:.2f}s")


if __name__ == "__main__":
    main()
