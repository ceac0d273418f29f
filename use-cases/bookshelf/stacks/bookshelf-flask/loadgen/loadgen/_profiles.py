"""Traffic profiles: which request the n-th arrival makes, and how its answer is judged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ._checks import AnswerCheck, Request
from ._searches import SearchSet, build_search_set
from ._truth import SEARCH_LIMIT, Verdict, catalogue_editions, open_library

_LISTING_PAGES = 20
_LIBRARY_SIZE = 20_000
PROFILE_NAMES = ("listing-mix", "search-storm")
DEFAULT_SEED = 1


@dataclass(frozen=True, slots=True)
class Profile:
    """A deterministic request sequence, the working set worth warming, the answer check."""

    name: str
    request: Callable[[int], Request]
    working_set: tuple[Request, ...]
    check: AnswerCheck | None = None
    searches: SearchSet | None = None
    """The search working set and its truth, for profiles that search."""


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


def search_storm(searches: SearchSet) -> Profile:
    """Searches drawn from `searches`, each answer judged against its truth."""

    def request(n: int) -> Request:
        return "/search", {"q": searches.query(n), "limit": str(SEARCH_LIMIT)}

    def check(sent: Request, body: bytes) -> Verdict:
        return searches.truth.judge(sent[1]["q"], body)

    warm = tuple(("/search", {"q": q, "limit": str(SEARCH_LIMIT)}) for q in searches.warm)
    return Profile("search-storm", request, warm, check, searches)


def profile_named(name: str, truth_db: Path | None = None, seed: int = DEFAULT_SEED) -> Profile:
    """The profile called `name`; ValueError lists the known ones or names what is missing.

    `search-storm` draws its working set and its expected answers from the library at
    `truth_db` (read-only, before the first request).
    """
    if name == "listing-mix":
        return Profile("listing-mix", _listing_mix, ())
    if name == "search-storm":
        if truth_db is None:
            raise ValueError("profile 'search-storm' needs --truth-db (the seeded library)")
        conn = open_library(truth_db)
        try:
            return search_storm(build_search_set(conn, seed, catalogue_editions(truth_db)))
        finally:
            conn.close()
    known = ", ".join(PROFILE_NAMES)
    raise ValueError(f"unknown profile {name!r} (known: {known})")
