"""loadgen's `browse-mix` profile: searches, and readers scrolling the title listing, every
page judged against the library in either of the two title orders the API has shipped."""

from __future__ import annotations

import importlib
import json
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def browse(loadgen: ModuleType, library: Path) -> Any:
    """The browse-mix profile over the seeded library (seed 1, as stack.toml runs it)."""
    return loadgen.profile_named("browse-mix", library, 1)


def _rows(library: Path, order_by: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{library}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            f"SELECT id, isbn, title, author, published_year, pages FROM books ORDER BY {order_by}"
        )
        names = ("id", "isbn", "title", "author", "published_year", "pages")
        return [dict(zip(names, row, strict=True)) for row in rows]
    finally:
        conn.close()


def _page(books: list[dict[str, Any]], params: dict[str, str], total: int) -> bytes:
    ordered = books[::-1] if params["order"] == "desc" else books
    start = (int(params["page"]) - 1) * 25
    items = [{**b, "status": "want", "rating": None, "added_at": "2023-01-01T00:00:00Z"}
             for b in ordered[start : start + 25]]  # fmt: skip
    return json.dumps({"items": items, "page": int(params["page"]), "per_page": 25,
                       "total": total}).encode()  # fmt: skip


def _listings(browse: Any, count: int) -> list[dict[str, str]]:
    return [params for path, params in map(browse.request, range(count)) if path == "/books"]


def test_readers_scroll_three_title_pages_every_forty_requests(browse: Any) -> None:
    """3 of every 40 requests are consecutive title pages (one scroll), the rest searches
    of the storm's working set; scrolls alternate order and spread over the library."""
    sent = [browse.request(n) for n in range(4000)]
    assert sum(path == "/books" for path, _ in sent) == 300
    assert all(path == "/search" for path, _ in sent[:37])
    scrolls = [[int(p["page"]) for _, p in sent[n : n + 3]] for n in range(37, 4000, 40)]
    assert all(pages == [pages[0], pages[0] + 1, pages[0] + 2] for pages in scrolls)
    assert all(pages[0] >= 1 and pages[2] <= 800 for pages in scrolls)
    assert len({pages[0] for pages in scrolls}) == 100
    assert {p["order"] for _, p in sent[37:120] if "order" in p} == {"asc", "desc"}
    assert browse.working_set
    assert all(path == "/search" for path, _ in browse.working_set)


def test_a_page_in_either_title_order_is_ok(
    loadgen: ModuleType, browse: Any, library: Path
) -> None:
    """By the lower-cased title (the listing before filing order) or in filing order (the
    article set aside, ties by author): both are correct pages."""
    by_key = _rows(library, "title_key, id")
    pages = importlib.import_module("loadgen._pages")
    filed = sorted(by_key, key=lambda b: (pages.filing_key(b["title"]),
                                          pages.filing_key(b["author"]), b["id"]))  # fmt: skip
    assert [b["id"] for b in filed] != [b["id"] for b in by_key]
    for params in _listings(browse, 400):
        for books in (by_key, filed):
            assert browse.check(("/books", params), _page(books, params, 20_000)) == "ok"


def test_a_page_of_other_books_or_order_is_wrong(browse: Any, library: Path) -> None:
    """Pages in id order, the right books shuffled, a changed title, a wrong total, and no
    listing at all are each wrong (never merely degraded)."""
    by_id = _rows(library, "id")
    by_key = _rows(library, "title_key, id")
    params = _listings(browse, 400)[4]
    assert browse.check(("/books", params), _page(by_id, params, 20_000)) == "wrong"
    right: dict[str, Any] = json.loads(_page(by_key, params, 20_000))
    shuffled = {**right, "items": right["items"][::-1]}
    renamed = {**right, "items": [{**right["items"][0], "title": "Dune"}, *right["items"][1:]]}
    answers: list[object] = [shuffled, renamed, {**right, "total": 19_999}, {"error": "x"}, []]
    for answer in answers:
        assert browse.check(("/books", params), json.dumps(answer).encode()) == "wrong"
    assert browse.check(("/books", params), b"not json") == "wrong"


def test_browse_mix_needs_the_library(loadgen: ModuleType) -> None:
    """Like the storm, the profile refuses to start without `--truth-db`."""
    with pytest.raises(ValueError, match="--truth-db"):
        loadgen.profile_named("browse-mix")
