from __future__ import annotations

import sqlite3
from pathlib import Path

from bookshelf.seed import CLASSICS, generate, isbn13, seed


def test_seed_is_deterministic() -> None:
    assert list(generate(200, seed=3)) == list(generate(200, seed=3))


def test_seed_replaces_previous_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite")
    assert seed(path, 120) == 120
    assert seed(path, 80) == 80


def test_classics_come_first_and_isbns_are_valid(tmp_path: Path) -> None:
    rows = list(generate(len(CLASSICS) + 50))
    assert [row[0] for row in rows[: len(CLASSICS)]] == [c[0] for c in CLASSICS]
    for row in rows:
        isbn = str(row[0])
        assert isbn13(isbn[:12]) == isbn
    assert len({row[0] for row in rows}) == len(rows)


def test_title_order_is_served_by_an_index(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite")
    seed(path, 100)
    with sqlite3.connect(path) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM books ORDER BY title_key, id LIMIT 25"
        ).fetchall()
    assert any("ix_books_title_key" in str(step) for step in plan), plan
