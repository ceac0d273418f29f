"""The `search-page-mix` load: readers leafing through the library, and the search page.

Of every `PAGE_SEARCH_EVERY` requests, one is a search from the web client's search page
(`limit=PAGE_LIMIT`, its result list); the others are single pages of the title listing
(`GET /books?sort=title`, judged like `browse-mix`'s scrolls, `_pages.py`), spread over
the library. The search page looks for `PAGE_TITLES` of the storm's working-set titles
(`_searches.py`, most popular first) that fill a result list (at least `PAGE_LIMIT` books
of that exact title), taken in turn, each time spelled another of the ways the storm
spells it (the title's queries in a seeded order, one after the other).

The arithmetic (20 requests/s; time scale 0.1, where the alert window is 3 s and the
metadata cache's TTL 30 s):
- a search page is 1 request in 25: 0.8/s, ~3 % of requests, 2-3 in every alert window.
  p99 follows them: above 0.3 s whenever they are (1 % would do);
- each returns `PAGE_LIMIT` = 6 books, each with its `current_page` (one progress lookup
  per hit, `app/bookshelf/db.py::CURRENT_PAGE`) and its metadata; the warm-up search of a
  fresh build (6 lookups of ~1.2 s, one after the other) stays inside the load's 10 s
  request timeout;
- in turn, a title comes back every 20 s (16 titles), within one TTL of the metadata
  cache (30 s): a book read at least once per TTL stays cached (an entry read in its
  second TTL is refreshed in the background), so after warm-up a working build answers
  every search page from its cache;
- the title pages cost the app an index walk (a few ms) and never read the progress table;
- a spelling comes back only after the title's every other spelling (16 or more: 320 s
  or more apart), so a cache of search answers kept for a minute answers none of them.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass

from ._searches import SearchSet
from ._truth import EditionLookup, SearchTruth, title_search

PAGE_LIMIT = 6
"""The `limit` the search page sends: its result list."""
PAGE_SEARCH_EVERY = 25
"""In `search-page-mix`, one request in PAGE_SEARCH_EVERY is a search-page search."""
PAGE_TITLES = 16
"""Titles the search page looks for, in turn (one every 20 s at 20 requests/s)."""


@dataclass(frozen=True, slots=True)
class PageTitle:
    """One title of the search page's rotation and its spellings, in the order sent."""

    title: str
    spellings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SearchPage:
    """The search page's titles in turn, and the truth of every spelling at `PAGE_LIMIT`."""

    titles: tuple[PageTitle, ...]
    truth: SearchTruth
    seed: int

    def query(self, k: int) -> str:
        """The k-th search-page query: title k mod len(titles), its next spelling."""
        title = self.titles[k % len(self.titles)]
        return title.spellings[(k // len(self.titles)) % len(title.spellings)]

    @property
    def warm(self) -> tuple[str, ...]:
        """One query per title: every book the search page can return."""
        return tuple(title.title for title in self.titles)


def build_search_page(
    conn: sqlite3.Connection, searches: SearchSet, editions: EditionLookup
) -> SearchPage:
    """The search page over the storm's working set `searches` on the library `conn`."""
    rng = random.Random(f"{searches.seed}:page")
    titles: list[PageTitle] = []
    for title in searches.warm:
        books = [row["id"] for row in title_search(conn, title, PAGE_LIMIT)]
        same = conn.execute("SELECT COUNT(*) FROM books WHERE title_key = ?", (title,))
        if len(books) < PAGE_LIMIT or same.fetchone()[0] < PAGE_LIMIT:
            continue
        spellings = [q for q in searches.queries
                     if [r["id"] for r in title_search(conn, q, PAGE_LIMIT)] == books]  # fmt: skip
        rng.shuffle(spellings)
        titles.append(PageTitle(title, tuple(spellings or [title])))
        if len(titles) == PAGE_TITLES:
            break
    if len(titles) < PAGE_TITLES:
        raise ValueError(f"the working set has {len(titles)} titles of {PAGE_LIMIT}+ books, "
                         f"fewer than {PAGE_TITLES}")  # fmt: skip
    queries = [q for title in titles for q in title.spellings]
    truth = SearchTruth.build(conn, queries, editions, PAGE_LIMIT)
    return SearchPage(tuple(titles), truth, searches.seed)
