"""Traffic profiles: which request the n-th arrival makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# (path, query parameters)
Request = tuple[str, dict[str, str]]

SEARCH_QUERIES = (
    "dune", "the hobbit", "neuromancer", "foundation",
    "hyperion", "dracula", "mistborn", "sapiens",
)  # fmt: skip
_LISTING_PAGES = 20
_LIBRARY_SIZE = 20_000


@dataclass(frozen=True, slots=True)
class Profile:
    """A deterministic request sequence plus the working set worth warming."""

    name: str
    request: Callable[[int], Request]
    working_set: tuple[Request, ...]


def _search_storm(n: int) -> Request:
    return "/search", {"q": SEARCH_QUERIES[n % len(SEARCH_QUERIES)]}


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


PROFILES: dict[str, Profile] = {
    "search-storm": Profile(
        "search-storm",
        _search_storm,
        tuple(_search_storm(n) for n in range(len(SEARCH_QUERIES))),
    ),
    "listing-mix": Profile("listing-mix", _listing_mix, ()),
}


def profile_named(name: str) -> Profile:
    """The profile called `name`; ValueError lists the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown profile {name!r} (known: {known})") from None
