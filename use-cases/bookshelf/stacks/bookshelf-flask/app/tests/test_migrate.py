from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bookshelf.db import connect
from bookshelf.migrate import available, main, migrate


def _indexes(conn: sqlite3.Connection, table: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                        (table,))  # fmt: skip
    return {row[0] for row in rows if not row[0].startswith("sqlite_")}


def test_a_fresh_database_gets_every_migration_once(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "fresh.db"))
    shipped = [m.version for m in available()]
    assert migrate(conn) == shipped
    assert migrate(conn) == []
    recorded = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    assert recorded == shipped


def test_migrations_are_numbered_in_order() -> None:
    versions = [m.version for m in available()]
    assert versions == sorted(versions)
    assert versions[0] == "0001"
    assert all(len(v) == 4 for v in versions)


def test_a_database_from_before_migrations_is_adopted(tmp_path: Path) -> None:
    """A library created by the old inline schema keeps its rows and gains the new tables."""
    path = str(tmp_path / "old.db")
    conn = connect(path)
    conn.executescript(available()[0].sql)
    conn.execute(
        "INSERT INTO books (isbn, title, title_key, author, author_key, added_at) "
        "VALUES ('9780000000002', 'Dune', 'dune', 'F', 'f', '2024-01-01T00:00:00Z')"
    )
    conn.commit()
    migrate(conn)
    assert conn.execute("SELECT COUNT(*) FROM books").fetchone()[0] == 1
    assert "reading_progress" in {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }


def test_a_failing_migration_leaves_nothing_half_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bookshelf import migrate as module

    conn = connect(str(tmp_path / "broken.db"))
    good = available()
    broken = module.Migration("9999", "broken", "CREATE TABLE half (x); SELECT nope FROM nowhere;")
    monkeypatch.setattr(module, "available", lambda: [*good, broken])
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "half" not in tables
    assert "9999" not in {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def test_a_fresh_database_has_the_search_tables(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "fresh.db"))
    migrate(conn)
    assert "ix_books_title_key" in _indexes(conn, "books")
    assert "reading_progress" in {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }


def test_the_command_line_reports_what_it_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "cli.db")
    main(["--db", path])
    assert "applied" in capsys.readouterr().out
    main(["--db", path])
    assert "none pending" in capsys.readouterr().out
