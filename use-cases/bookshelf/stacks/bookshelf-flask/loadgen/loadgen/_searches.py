"""The search-storm working set: which searches readers make, and how often.

Drawn from the library itself. A *title* is a distinct title of the library (all 18
well-known classics plus `GENERATED_TITLES` generated ones chosen by the seed). Its
*queries* are what readers type for it: every prefix of 3+ characters, lower-case, as
printed, upper-case and sentence-case, kept when the prefix still finds exactly the
books the whole title finds (so every query of a title hits the same books). With 48
titles that is 1,286-1,457 distinct queries (seeds 1-8; fewer than 1,000 is an error).

Popularity, both levels Zipf-like and ordered by the seed: title i (1-based) has weight
i^-0.3 (the most popular title ~4.5 % of searches, the least ~1.4 %), and within a
title its j-th query has weight j^-1 (a few spellings dominate). The query-level
distribution is therefore heavily skewed while every title stays in demand.

The arithmetic that makes a working cache hold the objective (p99 < 0.3 s):
- a search (limit 2, `SEARCH_LIMIT`) whose books are not all cached waits 1.2 s per
  missing book on the metadata service, so p99 < 0.3 s needs < 1 % such searches in
  every alert window. At time
  scale 0.1 the rule window is 3 s (60 searches at 20/s): one cold search in it already
  reads as p99 ~7 s. So the budget for cold searches after warm-up is zero, not 1 %.
- warm-up sends one search per title (48 at once, <= 2 books each): every book any query
  can return is then cached (78 books for seed 1). On a cold build that is <= 2 x 1.3 s
  ~ 2.6 s of wall time (48 searches fit the API's 64 threads at once), on the faulted
  build too.
- an entry stays usable for 2 TTL and is refreshed in the background when read in its
  second TTL, so a book stays cached while it is read at least once per TTL. The least
  popular title is ~1.4 % of searches: at 20/s that is 8.5 reads per 30 s TTL (scale
  0.1; the chance of none in a TTL is e^-8.5 ~ 2e-4) and 85 per 300 s TTL (scale 1,
  e^-85). So after warm-up the fixed build serves every search from its cache.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ._truth import EditionLookup, SearchTruth, title_search

GENERATED_TITLES = 30
"""Generated titles in the working set, next to the classics."""
CLASSICS = 18
"""The library's first rows are the well-known classics (`bookshelf.seed.CLASSICS`)."""
TITLE_EXPONENT = 0.3
QUERY_EXPONENT = 1.0
MIN_QUERIES = 1000
_MIN_PREFIX = 3


@dataclass(frozen=True, slots=True)
class SearchSet:
    """Queries with their popularity, the truth for each, and one query per title to warm."""

    queries: tuple[str, ...]
    cumulative: tuple[float, ...]
    """Cumulative share of searches up to and including each query (the last is 1)."""
    warm: tuple[str, ...]
    truth: SearchTruth
    seed: int

    def query(self, n: int) -> str:
        """The n-th search's query: a seeded draw, the same for the same (seed, n)."""
        digest = hashlib.blake2b(f"{self.seed}:{n}".encode(), digest_size=8).digest()
        point = int.from_bytes(digest) / 2**64
        return self.queries[min(bisect_right(self.cumulative, point), len(self.queries) - 1)]

    def share(self, query: str) -> float:
        """The probability that a search asks `query`."""
        i = self.queries.index(query)
        return self.cumulative[i] - (self.cumulative[i - 1] if i else 0.0)

    def warmed_books(self) -> set[str]:
        """ISBNs the warm-up queries bring into the cache."""
        return {hit.isbn for q in self.warm for hit in self.truth.expected(q)}

    def book_share(self, isbn: str) -> float:
        """The probability that a search returns the book with this ISBN."""
        return sum(self.share(q) for q in self.queries
                   if any(hit.isbn == isbn for hit in self.truth.expected(q)))  # fmt: skip


def build_search_set(conn: sqlite3.Connection, seed: int, editions: EditionLookup) -> SearchSet:
    """The working set for the library on `conn`, ordered and weighted by `seed`."""
    rng = random.Random(seed)
    queries: list[str] = []
    weights: list[float] = []
    warm: list[str] = []
    seen: set[str] = set()
    for rank, title in enumerate(_titles(conn, rng), 1):
        variants = [q for q in _spellings(conn, title) if q not in seen]
        rng.shuffle(variants)
        seen.update(variants)
        warm.append(title.lower())
        queries.extend(variants)
        norm = sum(j**-QUERY_EXPONENT for j in range(1, len(variants) + 1))
        weights.extend(rank**-TITLE_EXPONENT * j**-QUERY_EXPONENT / norm
                       for j in range(1, len(variants) + 1))  # fmt: skip
    if len(queries) < MIN_QUERIES:
        raise ValueError(f"the library yields {len(queries)} distinct queries, fewer than "
                         f"{MIN_QUERIES}")  # fmt: skip
    truth = SearchTruth.build(conn, [*queries, *warm], editions)
    total = sum(weights)
    cumulative = tuple(w / total for w in accumulate(weights))
    return SearchSet(tuple(queries), cumulative, tuple(warm), truth, seed)


def _titles(conn: sqlite3.Connection, rng: random.Random) -> list[str]:
    """The classics and `GENERATED_TITLES` other distinct titles, in a seeded order."""
    rows = conn.execute("SELECT id, title FROM books ORDER BY id").fetchall()
    if len(rows) <= CLASSICS:
        raise ValueError(f"the library has {len(rows)} books; the working set needs more")
    classics = [str(title) for _, title in rows[:CLASSICS]]
    keys = {title.lower() for title in classics}
    others = sorted({str(t) for _, t in rows[CLASSICS:] if str(t).lower() not in keys})
    chosen = classics + rng.sample(others, min(GENERATED_TITLES, len(others)))
    rng.shuffle(chosen)
    return chosen


def _spellings(conn: sqlite3.Connection, title: str) -> list[str]:
    """Prefixes of `title` in four cases that find exactly what the whole title finds."""
    want = [row["id"] for row in title_search(conn, title)]
    found: list[str] = []
    for end in range(_MIN_PREFIX, len(title) + 1):
        prefix = title[:end]
        if prefix != prefix.rstrip():
            continue
        if [row["id"] for row in title_search(conn, prefix)] != want:
            continue
        found.extend(dict.fromkeys((prefix.lower(), prefix, prefix.upper(), prefix.capitalize())))
    return found
