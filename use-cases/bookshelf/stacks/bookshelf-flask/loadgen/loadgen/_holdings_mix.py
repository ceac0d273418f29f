"""The `holdings-mix` load: readers asking where to borrow a book, and leafing through the
library.

Of every `HOLDINGS_EVERY` requests, the first `HOLDINGS_EVERY - 1` ask a book's holdings
(`GET /books/<id>/holdings`: the book, and how many libraries hold it and how many copies
are on a shelf, which the service asks the metadata service for live) and the last is a
page of the title listing (judged like `browse-mix`'s scrolls, `_pages.py`). The books are
seeded draws over the whole library, so a cache of holdings would keep few of them: at 15
holdings a second over 20,000 books, a minute's answers are ~4 % of what the next minute
asks.

A holdings answer is `ok` when its book is the library's (every checked field) and its
holdings are what the metadata service answered for that ISBN at some moment between the
request leaving and its answer being judged (from that service's own code, like the
editions: `catalogue_holdings`; the copies on a shelf change every ten seconds, so counts
kept from earlier, by a cache or a table fetched at start, are mostly wrong); `degraded`
when the book is right and `holdings` is null (the service could not ask); `wrong`
otherwise (another book, made-up or stale counts, no answer).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ._pages import PER_PAGE, ListingTruth
from ._truth import CHECKED_FIELDS, Verdict

HOLDINGS_EVERY = 4
"""In `holdings-mix`, the last of every HOLDINGS_EVERY requests is a listing page."""
WARM_REQUESTS = 16
"""The warm-up: the load's first requests, sent at once."""
_UPSTREAM_SOURCE = Path(__file__).resolve().parents[2] / "upstream"

# Every holdings the metadata service answers for an ISBN between two wall-clock times.
HoldingsLookup = Callable[[str, float, float], list[dict[str, object]]]
Request = tuple[str, dict[str, str]]


def catalogue_holdings() -> HoldingsLookup:
    """The metadata service's holdings over a span of time, from its own module."""
    if str(_UPSTREAM_SOURCE) not in sys.path:
        sys.path.append(str(_UPSTREAM_SOURCE))
    lookup: HoldingsLookup = importlib.import_module("bookmeta._holdings").holdings_between
    return lookup


class HoldingsMix:
    """The request sequence over one library, and the verdict on each answer."""

    def __init__(
        self,
        listing: ListingTruth,
        holdings: HoldingsLookup,
        seed: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.listing = listing
        self._holdings = holdings
        self._ids = sorted(listing.books)
        self._seed = seed
        self._clock = clock

    def book_id(self, n: int) -> int:
        """The book the n-th request asks about: a seeded draw, the same for the same n."""
        digest = hashlib.blake2b(f"{self._seed}:holdings:{n}".encode(), digest_size=8).digest()
        return self._ids[int.from_bytes(digest) % len(self._ids)]

    def request(self, n: int) -> Request:
        """The n-th request of the load."""
        k, slot = divmod(n, HOLDINGS_EVERY)
        if slot < HOLDINGS_EVERY - 1:
            return f"/books/{self.book_id(n)}/holdings", {}
        number = 1 + (k * 97) % self.listing.pages
        order = ("asc", "desc")[k % 2]
        return "/books", {"sort": "title", "order": order, "page": str(number),
                          "per_page": str(PER_PAGE)}  # fmt: skip

    def judge(self, sent: Request, body: bytes, sent_at: float | None = None) -> Verdict:
        """The verdict on the answer to `sent`, which left at wall-clock `sent_at` (now when
        None), judged now (see the module docstring)."""
        path, params = sent
        if path == "/books":
            return self.listing.judge(params, body)
        book_id = int(path.split("/")[2])
        try:
            answer = json.loads(body)
        except ValueError:
            return "wrong"
        if not isinstance(answer, dict) or not isinstance(answer.get("book"), dict):
            return "wrong"
        want = self.listing.books[book_id]
        book = answer["book"]
        if _canonical({k: book.get(k) for k in CHECKED_FIELDS}) != _canonical(
            {k: want[k] for k in CHECKED_FIELDS}
        ):
            return "wrong"
        holdings = answer.get("holdings")
        if holdings is None:
            return "degraded"
        now = self._clock()
        possible = self._holdings(str(want["isbn"]), now if sent_at is None else sent_at, now)
        return "ok" if _canonical(holdings) in {_canonical(h) for h in possible} else "wrong"


def _canonical(value: object) -> str:
    """As JSON, keys sorted: `true` is not 1 and 412.0 is not 412."""
    return json.dumps(value, sort_keys=True)
