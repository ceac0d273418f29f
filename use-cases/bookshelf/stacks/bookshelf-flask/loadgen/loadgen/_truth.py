"""The expected answer of every search the load sends, built before the first request.

Book rows come from the library file opened read-only, with the semantics of the API's
title search (`app/bookshelf/db.py::find_by_title_prefix`, called by `search.py` with
`q` stripped and the `limit` sent: `SEARCH_LIMIT`, or `PAGE_LIMIT` from the search page of
`search-page-mix`): titles whose lower-cased
form starts with the lower-cased query, ordered by that key then id, at most `limit`.
The definition is restated here on purpose: the load never imports the service's code.
Each hit's `current_page` is the page of the book's latest reading-progress entry
(`db.py::CURRENT_PAGE`: latest `logged_at`, then highest id; None if never read), and its
metadata is the edition the metadata service serves for its ISBN, from that service's own
catalogue.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SEARCH_LIMIT = 2
"""The `limit` every storm search sends (a two-line suggestion list; the API's default is 5).

It bounds what one search costs a build without a working cache (<= 2 lookups of ~1.2 s
each): at 20 searches/s that is ~40 searches in flight, within the API's 64 threads, so
a slow build stays slow instead of also refusing its metrics scrapes.
"""
CHECKED_FIELDS = ("id", "isbn", "title", "author", "published_year", "pages")
"""Row fields compared with the library; status and rating are the reader's to change."""
PROGRESS_FIELD = "current_page"
"""The hit's reading position, compared with the library's latest progress entry."""
_UPSTREAM_SOURCE = Path(__file__).resolve().parents[2] / "upstream"

Verdict = Literal["ok", "degraded", "wrong"]
# The metadata a hit must carry for an ISBN (None: the service knows no such edition).
EditionLookup = Callable[[str], dict[str, object] | None]


class TruthError(Exception):
    """The library file cannot give the expected answers (missing, unreadable, empty)."""


@dataclass(frozen=True, slots=True)
class ExpectedHit:
    """One hit of an expected answer: the row's checked fields and its edition."""

    row: dict[str, object]
    metadata: dict[str, object] | None

    @property
    def isbn(self) -> str:
        """The hit's ISBN-13."""
        return str(self.row["isbn"])


def open_library(path: Path) -> sqlite3.Connection:
    """The library at `path`, read-only; TruthError names the file when it is unusable."""
    if not path.is_file():
        raise TruthError(f"--truth-db {path}: no such file")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.execute("SELECT 1 FROM books LIMIT 1").fetchall()
    except sqlite3.Error as error:
        raise TruthError(f"--truth-db {path}: not a library ({error})") from None
    return conn


def title_search(
    conn: sqlite3.Connection, query: str, limit: int = SEARCH_LIMIT
) -> list[dict[str, object]]:
    """The rows the API's search returns for `query` and `limit` (see the module docstring)."""
    key = query.strip().lower()
    rows = conn.execute(
        f"SELECT {', '.join(CHECKED_FIELDS)} FROM books "
        "WHERE title_key >= ? AND title_key < ? ORDER BY title_key, id LIMIT ?",
        (key, key + "\uffff", limit),
    ).fetchall()
    return [dict(zip(CHECKED_FIELDS, row, strict=True)) for row in rows]


def current_pages(conn: sqlite3.Connection, book_ids: set[int]) -> dict[int, int]:
    """The page of each book's latest progress entry, for the books in `book_ids` that have
    one: one pass over the table, whatever its indexes (the load may start on any build)."""
    if not book_ids:
        return {}
    marks = ", ".join("?" for _ in book_ids)
    rows = conn.execute(
        f"SELECT book_id, page FROM reading_progress WHERE book_id IN ({marks}) "
        "ORDER BY book_id, logged_at, id",
        sorted(book_ids),
    )
    return {int(book_id): int(page) for book_id, page in rows}  # the last row wins


def catalogue_editions(library: Path) -> EditionLookup:
    """The metadata service's editions for `library`, from its own catalogue module."""
    if str(_UPSTREAM_SOURCE) not in sys.path:
        sys.path.append(str(_UPSTREAM_SOURCE))
    catalogue = importlib.import_module("bookmeta._catalogue").load_catalogue(library)

    def edition(isbn: str) -> dict[str, object] | None:
        found = catalogue.get(isbn)
        return None if found is None else dict(found.to_json())

    return edition


class SearchTruth:
    """Expected answers by query, and the verdict on an answer against them."""

    def __init__(self, expected: Mapping[str, tuple[ExpectedHit, ...]]) -> None:
        self._expected = dict(expected)

    @classmethod
    def build(
        cls,
        conn: sqlite3.Connection,
        queries: Iterable[str],
        editions: EditionLookup,
        limit: int = SEARCH_LIMIT,
    ) -> SearchTruth:
        """The expected answer of each query sent with `limit`, from the library and the
        catalogue."""
        found = {query: title_search(conn, query, limit) for query in queries}
        pages = current_pages(conn, {int(str(r["id"])) for rows in found.values() for r in rows})
        expected = {
            query: tuple(
                ExpectedHit(
                    {**row, PROGRESS_FIELD: pages.get(int(str(row["id"])))},
                    editions(str(row["isbn"])),
                )
                for row in rows
            )
            for query, rows in found.items()
        }
        return cls(expected)

    def __contains__(self, query: object) -> bool:
        return query in self._expected

    def __len__(self) -> int:
        return len(self._expected)

    def expected(self, query: str) -> tuple[ExpectedHit, ...]:
        """The expected hits of `query`; KeyError for a query outside the working set."""
        return self._expected[query]

    def judge(self, query: str, body: bytes) -> Verdict:
        """`ok`: every hit equals the truth, in order, metadata included. `degraded`: a
        correct answer short of it (fewer hits, null metadata where an edition exists, or
        no `current_page` where the book has progress).
        `wrong`: anything that disagrees (a made-up hit, a changed field, another order,
        invented metadata, more hits than exist, a body that is no search answer)."""
        hits = _hits(body)
        want = self.expected(query)
        if hits is None or len(hits) > len(want):
            return "wrong"
        short = len(hits) < len(want)
        for hit, expected in zip(hits, want, strict=False):
            if not isinstance(hit, dict):
                return "wrong"
            if not _same({k: hit.get(k) for k in CHECKED_FIELDS}, _book(expected.row)):
                return "wrong"
            page = hit.get(PROGRESS_FIELD)
            if page is None and expected.row[PROGRESS_FIELD] is not None:
                short = True
            elif not _same(page, expected.row[PROGRESS_FIELD]):
                return "wrong"
            metadata = hit.get("metadata")
            if metadata is None and expected.metadata is not None:
                short = True
            elif not _same(metadata, expected.metadata):
                return "wrong"
        return "degraded" if short else "ok"


def _book(row: Mapping[str, object]) -> dict[str, object]:
    return {k: row[k] for k in CHECKED_FIELDS}


def _hits(body: bytes) -> list[object] | None:
    """The answer's hits when it is a search answer whose count matches them, else None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    hits = answer.get("results")
    if not isinstance(hits, list) or not _same(answer.get("count"), len(hits)):
        return None
    return hits


def _same(left: object, right: object) -> bool:
    """Equal as JSON values: `true` is not 1 and 412.0 is not 412."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)
