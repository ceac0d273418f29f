"""The app on PostgreSQL answers as it does on SQLite, through a pool that can run dry.

Against a real PostgreSQL server of this module's own (the deployer's `PostgresServer`,
the binaries `scripts/setup` installs), a fresh database per test; the same seeded
library is served from SQLite and from PostgreSQL and every answer compared.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import psycopg
import pytest
from flask import Flask
from sreforge_deployer import DeployerSettings
from sreforge_deployer._ports import PortAllocator
from sreforge_deployer.local._postgres import POSTGRES, PostgresServer, find_postgres_bin

from .conftest import APP

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BOOKS = 300
LISTINGS = [
    f"/books?sort={sort}&order={order}&page={page}&per_page={per}"
    for sort in ("title", "author", "year", "added")
    for order in ("asc", "desc")
    for page, per in ((1, 25), (3, 7), (13, 25))
]
SEARCHES = [f"/search?q={q}&limit=20" for q in ("d", "dune", "the", "a ", "The S", "zz", "ü")]


@pytest.fixture(scope="module")
def bookshelf() -> Iterator[ModuleType]:
    """The app package (`app/bookshelf`), imported from the stack's tree."""
    sys.path.insert(0, str(APP))
    try:
        import bookshelf

        yield bookshelf
    finally:
        sys.path.remove(str(APP))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the module, on a leased loopback port."""
    run_dir = tmp_path_factory.mktemp("pg-run")
    run_dir.chmod(0o700)
    lease = PortAllocator(DeployerSettings().port_lock_dir).lease(1)[0]
    server = PostgresServer(run_dir / POSTGRES, lease.port, run_dir / "logs", find_postgres_bin())
    server.start()
    try:
        yield server
    finally:
        leftovers = server.stop()
        lease.release()
        assert leftovers == []


@pytest.fixture
def database_url(server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database of the test's own (the service's role owns it), dropped
    after it."""
    name = f"t_{request.node.name.lower()}"[:60].replace("[", "_").replace("]", "")
    with psycopg.connect(server.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" OWNER bookshelf')
    try:
        yield f"{server.url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def library(bookshelf: ModuleType, tmp_path: Path, database_url: str) -> str:
    """A seeded SQLite library, copied into the test's database; the SQLite path."""
    from bookshelf.postgres import main as load
    from bookshelf.seed import seed

    path = str(tmp_path / "library.db")
    seed(path, BOOKS)
    load(["--database-url", database_url, "--from-sqlite", path])
    return path


def _metadata(request: httpx.Request) -> httpx.Response:
    isbn = request.url.path.rsplit("/", 1)[-1]
    return httpx.Response(200, json={"isbn": isbn, "title": "t", "authors": ["a"]})


def _app(bookshelf: ModuleType, db_path: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> Flask:
    for name in ("BOOKSHELF_DATABASE_URL", "BOOKSHELF_DB_POOL_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = bookshelf.Settings(db_path=db_path, upstream_url="http://metadata.test")
    app: Flask = bookshelf.create_app(settings, upstream_transport=httpx.MockTransport(_metadata))
    return app


def _close(app: Flask) -> None:
    pool = app.extensions.get("bookshelf.postgres")
    if pool is not None:
        pool.close()


@pytest.fixture
def both(
    bookshelf: ModuleType, library: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Flask, Flask]]:
    """The same library served from SQLite and from PostgreSQL."""
    on_pg = _app(bookshelf, library, monkeypatch, BOOKSHELF_DATABASE_URL=database_url)
    monkeypatch.delenv("BOOKSHELF_DATABASE_URL")
    on_sqlite = _app(bookshelf, library, monkeypatch)
    assert "bookshelf.postgres" in on_pg.extensions
    assert "bookshelf.postgres" not in on_sqlite.extensions
    try:
        yield on_sqlite, on_pg
    finally:
        _close(on_pg)


def _answer(app: Flask, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    response = app.test_client().open(url, method=method, json=body)
    return response.status_code, _unstamped(response.get_json(silent=True))


def _unstamped(payload: Any) -> Any:
    """The answer without the clock time of books this test created: the two apps write
    them moments apart, so those seconds may differ wherever the book appears."""
    if isinstance(payload, list):
        return [_unstamped(item) for item in payload]
    if not isinstance(payload, dict):
        return payload
    created = isinstance(payload.get("id"), int) and payload["id"] > BOOKS
    return {k: _unstamped(v) for k, v in payload.items() if not (created and k == "added_at")}


def test_reads_answer_as_on_sqlite(both: tuple[Flask, Flask]) -> None:
    """Every listing order and page, title-prefix searches (with `current_page`) and
    single books: the same JSON from either database."""
    on_sqlite, on_pg = both
    for url in [*LISTINGS, *SEARCHES, "/books/1", "/books/300", "/books/301"]:
        expected = _answer(on_sqlite, "GET", url)
        assert expected[0] in (200, 404), url
        assert _answer(on_pg, "GET", url) == expected, url


def test_writes_answer_as_on_sqlite(both: tuple[Flask, Flask]) -> None:
    """Create (the next id), a duplicate ISBN (409), PATCH, PUT and DELETE (progress
    entries go with the book) behave the same on either database."""
    book = {"isbn": "9780000000002", "title": "Ölmond", "author": "Ida Berg", "pages": 200}
    steps: list[tuple[str, str, Any]] = [
        ("POST", "/books", book),
        ("POST", "/books", book),
        ("PATCH", f"/books/{BOOKS + 1}", {"title": "Zebra Days"}),
        ("PUT", f"/books/{BOOKS + 1}", {**book, "author": "Ada Quinn"}),
        ("PATCH", "/books/2", {"isbn": "9780000000002"}),
        ("DELETE", "/books/1", None),
        ("GET", "/books/1", None),
        ("GET", "/search?q=dune", None),
        ("GET", "/books?sort=title&order=desc&per_page=3", None),
    ]
    on_sqlite, on_pg = both
    for method, url, body in steps:
        expected = _answer(on_sqlite, method, url, body)
        assert _answer(on_pg, method, url, body) == expected, (method, url)


def test_migrations_apply_once(bookshelf: ModuleType, database_url: str) -> None:
    """A second start finds the schema current and applies nothing."""
    from bookshelf.postgres import migrate

    with psycopg.connect(database_url, autocommit=True) as conn:
        assert migrate(conn) == ["0001", "0002"]
        assert migrate(conn) == []


def test_pool_timeout_fails_the_request_not_the_probes(
    bookshelf: ModuleType, library: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every connection checked out a request waits the pool timeout, then fails;
    /healthz and /metrics need no connection and still answer."""
    app = _app(
        bookshelf,
        library,
        monkeypatch,
        BOOKSHELF_DATABASE_URL=database_url,
        BOOKSHELF_DB_POOL_SIZE="1",
        BOOKSHELF_DB_POOL_TIMEOUT_SECONDS="0.3",
    )
    pool = app.extensions["bookshelf.postgres"]
    held = pool.checkout()
    try:
        started = time.monotonic()
        status = app.test_client().get("/books/1").status_code
        waited = time.monotonic() - started
        assert status == 500
        assert waited >= 0.3
        assert app.test_client().get("/healthz").status_code == 200
        assert app.test_client().get("/metrics").status_code == 200
    finally:
        held.close()
        assert app.test_client().get("/books/1").status_code == 200
        _close(app)


@pytest.mark.parametrize(
    ("name", "value"),
    [("BOOKSHELF_DB_POOL_SIZE", "0"), ("BOOKSHELF_DB_POOL_TIMEOUT_SECONDS", "soon")],
)
def test_bad_pool_settings_name_the_variable(bookshelf: ModuleType, name: str, value: str) -> None:
    """A misconfigured pool refuses to start, saying which variable is wrong."""
    from bookshelf.postgres import PostgresSettings

    environ = {"BOOKSHELF_DATABASE_URL": "postgresql://x@127.0.0.1:1/x", name: value}
    with pytest.raises(ValueError, match=name):
        PostgresSettings.from_env(environ)
