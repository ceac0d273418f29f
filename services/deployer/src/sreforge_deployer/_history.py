"""The made-up but realistic history a run workspace is built with.

Each commit adds the not-yet-added source files matching its patterns (fnmatch on
POSIX paths relative to the app source); the last commit sweeps up the rest. Dates
and identities are fixed, so the same source always yields the same commit ids and a
scenario can pin a `base_commit`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_HISTORY", "SETUP_BAKED_TAIL", "Author", "HistoryCommit"]


@dataclass(frozen=True)
class Author:
    """A commit identity."""

    name: str
    email: str

    @property
    def ident(self) -> str:
        """`Name <email>`."""
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class HistoryCommit:
    """One commit of the history: who, when (ISO 8601 with offset), why, which files."""

    author: Author
    date: str
    message: str
    patterns: tuple[str, ...]


_MAYA = Author("Maya Okafor", "maya.okafor@shelfwise.io")
_DANIEL = Author("Daniel Brandt", "dbrandt@shelfwise.io")
_PRIYA = Author("Priya Raman", "priya.raman@shelfwise.io")
_TOMAS = Author("Tomás Ferreira", "tomas.ferreira@shelfwise.io")

DEFAULT_HISTORY: tuple[HistoryCommit, ...] = (
    HistoryCommit(
        _MAYA,
        "2026-09-28T10:14:07+01:00",
        "Initial Flask app with a health endpoint",
        (
            ".gitignore",
            "requirements*.txt",
            "bookshelf/__init__.py",
            "bookshelf/app.py",
            "bookshelf/config.py",
            "bookshelf/wsgi.py",
        ),
    ),
    HistoryCommit(
        _MAYA,
        "2026-10-01T16:42:51+01:00",
        "Add SQLite storage and the books CRUD endpoints\n\n"
        "Listing supports offset/limit pagination and sorting by title or author.",
        ("bookshelf/db.py", "bookshelf/books.py", "bookshelf/validation.py", "bookshelf/schema*"),
    ),
    HistoryCommit(
        _DANIEL,
        "2026-10-06T09:03:22+02:00",
        "Add a seed script for local development",
        ("bookshelf/seed.py",),
    ),
    HistoryCommit(
        _DANIEL,
        "2026-10-09T14:27:40+02:00",
        "Add tests for the books endpoints",
        ("tests/__init__.py", "tests/conftest.py", "tests/test_books*.py", "tests/test_valid*"),
    ),
    HistoryCommit(
        _PRIYA,
        "2026-10-15T11:18:09+05:30",
        "Enrich search results from the metadata service",
        ("bookshelf/upstream.py", "bookshelf/metadata.py", "bookshelf/search.py"),
    ),
    HistoryCommit(
        _PRIYA,
        "2026-10-20T15:51:33+05:30",
        "Cache metadata lookups in process with a TTL\n\n"
        "Lookups take over a second; a per-worker TTL cache keeps search fast.",
        ("bookshelf/cache.py", "tests/test_cache*.py", "tests/test_search*.py"),
    ),
    HistoryCommit(
        _TOMAS,
        "2026-10-27T13:05:58-03:00",
        "Expose Prometheus metrics for requests",
        ("bookshelf/metrics.py", "tests/test_metrics*.py"),
    ),
    HistoryCommit(
        _TOMAS,
        "2026-11-02T17:36:14-03:00",
        "Serve with gunicorn and aggregate metrics across workers",
        ("gunicorn.conf.py",),
    ),
    HistoryCommit(
        _MAYA,
        "2026-11-04T15:09:31+00:00",
        "Show reading progress in search; schema changes become numbered migrations\n\n"
        "The e-reader apps sync progress into reading_progress; search shows each hit's\n"
        "current page. The schema moves from db.py into bookshelf/migrations/, applied in\n"
        "order at start-up and recorded in schema_migrations.",
        (
            "bookshelf/migrate.py",
            "bookshelf/migrations/__init__.py",
            "bookshelf/migrations/0*",
            "tests/test_migrat*",
            "tests/test_progress*",
        ),
    ),
    HistoryCommit(
        _DANIEL,
        "2026-11-06T11:27:52+01:00",
        "Run the library on PostgreSQL when BOOKSHELF_DATABASE_URL is set\n\n"
        "The routes keep their SQL: each request checks a connection out of a pool\n"
        "(BOOKSHELF_DB_POOL_SIZE, default 20) that speaks the sqlite3 subset they use. The\n"
        "schema gets its own numbered migrations in bookshelf/migrations/postgres/, and\n"
        "`python -m bookshelf.postgres` copies a seeded library into a database.",
        ("bookshelf/postgres.py", "bookshelf/migrations/postgres/*"),
    ),
    HistoryCommit(
        _DANIEL,
        "2026-11-10T10:48:26+01:00",
        "Document configuration and local setup",
        ("README*", "docs/*"),
    ),
    HistoryCommit(
        _MAYA,
        "2026-11-16T12:22:45+00:00",
        "Tidy up tests and project files",
        ("*",),
    ),
)

# Setup-baked faults are placed before this many trailing commits, so they look old.
SETUP_BAKED_TAIL = 2
