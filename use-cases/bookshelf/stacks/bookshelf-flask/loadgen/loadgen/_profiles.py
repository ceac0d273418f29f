"""Traffic profiles: which request the n-th arrival makes, and how its answer is judged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ._checks import AnswerCheck, Request
from ._holdings_mix import WARM_REQUESTS, HoldingsMix, catalogue_holdings
from ._pages import PAGES_PER_SCROLL, PER_PAGE, ListingTruth
from ._search_page import PAGE_LIMIT, PAGE_SEARCH_EVERY, SearchPage, build_search_page
from ._searches import SearchSet, build_search_set
from ._truth import SEARCH_LIMIT, Verdict, catalogue_editions, open_library

_LISTING_PAGES = 20
_LIBRARY_SIZE = 20_000
PROFILE_NAMES = (
    "browse-mix",
    "holdings-mix",
    "listing-mix",
    "search-page-mix",
    "search-storm",
    "search-suggest",
)
DEFAULT_SEED = 1
SUGGEST_EVERY = 4
"""In `search-suggest`, every SUGGEST_EVERY-th search comes from the web client's suggestion box."""
_CACHE_BUSTER_BASE = 1_764_633_600_000
SCROLL_EVERY = 40
"""In `browse-mix`, one reader scrolls the library (`PAGES_PER_SCROLL` pages at once) per
SCROLL_EVERY requests; the others search."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A deterministic request sequence, the working set worth warming, the answer check."""

    name: str
    request: Callable[[int], Request]
    working_set: tuple[Request, ...]
    check: AnswerCheck | None = None
    searches: SearchSet | None = None
    """The search working set and its truth, for profiles that search."""
    search_page: SearchPage | None = None
    """The search page's titles and truth, for `search-page-mix`."""
    holdings: HoldingsMix | None = None
    """The holdings requests and their truth, for `holdings-mix`."""


def _listing(n: int) -> Request:
    sort = ("title", "author")[n % 2]
    order = ("asc", "desc")[(n // 2) % 2]
    return "/books", {"page": str(n % _LISTING_PAGES + 1), "sort": sort, "order": order}


def _listing_mix(n: int) -> Request:
    slot = n % 10
    if slot < 6:
        return _listing(n)
    if slot < 9:
        return f"/books/{(n * 7919) % _LIBRARY_SIZE + 1}", {}
    return "/books", {"sort": "added", "order": "desc"}


def search_storm(searches: SearchSet, *, suggest: bool = False) -> Profile:
    """Searches drawn from `searches`, each answer judged against its truth.

    With `suggest` (profile `search-suggest`), every `SUGGEST_EVERY`-th search is sent the
    way the web client's suggestion box sends it: with a cache-buster parameter `_` (a
    millisecond timestamp, here derived from n), which an API must ignore like any
    parameter it does not know. The query, and so the expected answer, is the same.
    """

    def request(n: int) -> Request:
        params = {"q": searches.query(n), "limit": str(SEARCH_LIMIT)}
        if suggest and n % SUGGEST_EVERY == SUGGEST_EVERY - 1:
            params["_"] = str(_CACHE_BUSTER_BASE + 50 * n)
        return "/search", params

    def check(sent: Request, body: bytes, sent_at: float | None = None) -> Verdict:
        return searches.truth.judge(sent[1]["q"], body)

    warm = tuple(("/search", {"q": q, "limit": str(SEARCH_LIMIT)}) for q in searches.warm)
    name = "search-suggest" if suggest else "search-storm"
    return Profile(name, request, warm, check, searches)


def browse_mix(searches: SearchSet, listing: ListingTruth) -> Profile:
    """Searches as in `search-storm`, and readers scrolling the library by title.

    Of every `SCROLL_EVERY` requests, the last `PAGES_PER_SCROLL` are consecutive pages of
    the title listing (one scroll: the web client asks for them together), ascending and
    descending scroll by scroll, spread over the whole library; every answer is judged,
    searches against their truth, pages against `ListingTruth`.
    """
    last_start = listing.pages - PAGES_PER_SCROLL + 1

    def request(n: int) -> Request:
        scroll, slot = divmod(n, SCROLL_EVERY)
        first = SCROLL_EVERY - PAGES_PER_SCROLL
        if slot < first:
            return "/search", {"q": searches.query(n), "limit": str(SEARCH_LIMIT)}
        page = 1 + (scroll * 97) % max(1, last_start) + slot - first
        order = ("asc", "desc")[scroll % 2]
        return "/books", {"sort": "title", "order": order, "page": str(page),
                          "per_page": str(PER_PAGE)}  # fmt: skip

    def check(sent: Request, body: bytes, sent_at: float | None = None) -> Verdict:
        path, params = sent
        if path == "/books":
            return listing.judge(params, body)
        return searches.truth.judge(params["q"], body)

    warm = tuple(("/search", {"q": q, "limit": str(SEARCH_LIMIT)}) for q in searches.warm)
    return Profile("browse-mix", request, warm, check, searches)


def search_page_mix(page: SearchPage, searches: SearchSet, listing: ListingTruth) -> Profile:
    """Readers leafing through the title listing, and every `PAGE_SEARCH_EVERY`-th request a
    search from the search page (`_search_page.py`); every answer judged, pages against
    `ListingTruth`, searches against their truth at `PAGE_LIMIT`."""

    def request(n: int) -> Request:
        k, slot = divmod(n, PAGE_SEARCH_EVERY)
        if slot == PAGE_SEARCH_EVERY - 1:
            return "/search", {"q": page.query(k), "limit": str(PAGE_LIMIT)}
        number = 1 + (n * 97) % listing.pages
        order = ("asc", "desc")[k % 2]
        return "/books", {"sort": "title", "order": order, "page": str(number),
                          "per_page": str(PER_PAGE)}  # fmt: skip

    def check(sent: Request, body: bytes, sent_at: float | None = None) -> Verdict:
        path, params = sent
        if path == "/books":
            return listing.judge(params, body)
        return page.truth.judge(params["q"], body)

    warm = tuple(("/search", {"q": q, "limit": str(PAGE_LIMIT)}) for q in page.warm)
    return Profile("search-page-mix", request, warm, check, searches, page)


def holdings_mix(mix: HoldingsMix) -> Profile:
    """Readers asking where to borrow a book, and every `HOLDINGS_EVERY`-th request a
    title-listing page (`_holdings_mix.py`); every answer judged. The warm-up is the load's
    first `WARM_REQUESTS` requests: no working set a cache could keep."""

    def check(sent: Request, body: bytes, sent_at: float | None = None) -> Verdict:
        return mix.judge(sent, body, sent_at)

    warm = tuple(mix.request(n) for n in range(WARM_REQUESTS))
    return Profile("holdings-mix", mix.request, warm, check, holdings=mix)


def profile_named(name: str, truth_db: Path | None = None, seed: int = DEFAULT_SEED) -> Profile:
    """The profile called `name`; ValueError lists the known ones or names what is missing.

    `search-storm`, `search-suggest`, `browse-mix`, `search-page-mix` and `holdings-mix`
    draw their working set and their expected answers from the library at `truth_db`
    (read-only, before the first request).
    """
    if name == "listing-mix":
        return Profile("listing-mix", _listing_mix, ())
    if name == "browse-mix":
        if truth_db is None:
            raise ValueError(f"profile {name!r} needs --truth-db (the seeded library)")
        conn = open_library(truth_db)
        try:
            searches = build_search_set(conn, seed, catalogue_editions(truth_db))
            return browse_mix(searches, ListingTruth.build(conn))
        finally:
            conn.close()
    if name == "holdings-mix":
        if truth_db is None:
            raise ValueError(f"profile {name!r} needs --truth-db (the seeded library)")
        conn = open_library(truth_db)
        try:
            return holdings_mix(HoldingsMix(ListingTruth.build(conn), catalogue_holdings(), seed))
        finally:
            conn.close()
    if name == "search-page-mix":
        if truth_db is None:
            raise ValueError(f"profile {name!r} needs --truth-db (the seeded library)")
        conn = open_library(truth_db)
        try:
            editions = catalogue_editions(truth_db)
            searches = build_search_set(conn, seed, editions)
            page = build_search_page(conn, searches, editions)
            return search_page_mix(page, searches, ListingTruth.build(conn))
        finally:
            conn.close()
    if name in ("search-storm", "search-suggest"):
        if truth_db is None:
            raise ValueError(f"profile {name!r} needs --truth-db (the seeded library)")
        conn = open_library(truth_db)
        try:
            searches = build_search_set(conn, seed, catalogue_editions(truth_db))
            return search_storm(searches, suggest=name == "search-suggest")
        finally:
            conn.close()
    known = ", ".join(PROFILE_NAMES)
    raise ValueError(f"unknown profile {name!r} (known: {known})")
