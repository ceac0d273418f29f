"""The `search-page-mix` load: readers leafing through the library, and the search page.

Of every `PAGE_SEARCH_EVERY` requests, one is a search from the web client's search page
(`limit=PAGE_LIMIT`, its result list); the others are single pages of the title listing
(`GET /books?sort=title`, judged like `browse-mix`'s scrolls, `_pages.py`), spread over
the library. The search page looks for the storm's working-set titles (`_searches.py`)
that fill a result list (at least `PAGE_LIMIT` books of that exact title), taken in turn,
each time spelled as one of the storm's queries for that title: a seeded draw with weight
j^-`SPELLING_EXPONENT`, in the storm's order (a few spellings lead, none dominates).

The arithmetic (20 requests/s; time scale 0.1, where the alert window is 3 s and the
metadata cache's TTL 30 s):
- a search page is 1 request in 25: 0.8/s, ~3 % of requests, 2-3 in every alert window.
  p99 follows them: above 0.3 s whenever they are (1 % would do);
- each returns `PAGE_LIMIT` = 6 books, each with its `current_page` (one progress lookup
  per hit, `app/bookshelf/db.py::CURRENT_PAGE`) and its metadata;
- in turn, a title comes back once per rotation (30 titles for seed 1: every 37.5 s),
  inside the metadata cache's two TTLs (60 s): after warm-up, a working build answers
  every search page from its cache;
- the title pages cost the app an index walk (a few ms) and never read the progress table;
- the same spelling of a title comes back rarely: on the sequence of seed 1, a cache of
  128 search answers kept for 60 s answers ~4.5 % of search pages (no two in a row more
  than once in ~600).
"""

from __future__ import annotations

import hashlib
import sqlite3
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ._searches import SearchSet
from ._truth import EditionLookup, SearchTruth, title_search

PAGE_LIMIT = 6
"""The `limit` the search page sends: its result list."""
PAGE_SEARCH_EVERY = 25
"""In `search-page-mix`, one request in PAGE_SEARCH_EVERY is a search-page search."""
MIN_PAGE_TITLES = 12
SPELLING_EXPONENT = 0.5


@dataclass(frozen=True, slots=True)
class PageTitle:
    """One title of the search page's rotation: its spellings, cumulative weights."""

    title: str
    spellings: tuple[str, ...]
    cumulative: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class SearchPage:
    """The search page's titles in turn, and the truth of every spelling at `PAGE_LIMIT`."""

    titles: tuple[PageTitle, ...]
    truth: SearchTruth
    seed: int

    def query(self, k: int) -> str:
        """The k-th search-page query: title k mod len(titles), a seeded spelling of it."""
        title = self.titles[k % len(self.titles)]
        digest = hashlib.blake2b(f"{self.seed}:page:{k}".encode(), digest_size=8).digest()
        point = int.from_bytes(digest) / 2**64
        i = min(bisect_right(title.cumulative, point), len(title.spellings) - 1)
        return title.spellings[i]

    @property
    def warm(self) -> tuple[str, ...]:
        """One query per title: every book the search page can return."""
        return tuple(title.title for title in self.titles)


def build_search_page(
    conn: sqlite3.Connection, searches: SearchSet, editions: EditionLookup
) -> SearchPage:
    """The search page over the storm's working set `searches` on the library `conn`."""
    titles: list[PageTitle] = []
    for title in searches.warm:
        books = [row["id"] for row in title_search(conn, title, PAGE_LIMIT)]
        rows = conn.execute(
            "SELECT COUNT(*) FROM books WHERE title_key = ?", (title.lower(),)
        ).fetchone()
        if len(books) < PAGE_LIMIT or rows[0] < PAGE_LIMIT:
            continue
        spellings = [q for q in searches.queries
                     if [r["id"] for r in title_search(conn, q, PAGE_LIMIT)] == books]  # fmt: skip
        if title not in spellings:
            spellings.insert(0, title)
        weights = [j**-SPELLING_EXPONENT for j in range(1, len(spellings) + 1)]
        total = sum(weights)
        cumulative = tuple(w / total for w in accumulate(weights))
        titles.append(PageTitle(title, tuple(spellings), cumulative))
    if len(titles) < MIN_PAGE_TITLES:
        raise ValueError(f"the working set has {len(titles)} titles of {PAGE_LIMIT}+ books, "
                         f"fewer than {MIN_PAGE_TITLES}")  # fmt: skip
    queries = [q for title in titles for q in title.spellings]
    truth = SearchTruth.build(conn, queries, editions, PAGE_LIMIT)
    return SearchPage(tuple(titles), truth, searches.seed)
