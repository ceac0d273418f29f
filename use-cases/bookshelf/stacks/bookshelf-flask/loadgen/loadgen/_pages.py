"""The expected pages of the library listing the `browse-mix` load reads.

The web client's library view scrolls: it asks for `PAGES_PER_SCROLL` consecutive pages of
`PER_PAGE` books sorted by title at once (`GET /books?sort=title&order=asc|desc&page=N
&per_page=25`). A page is checked against two total orders of the seeded library, either
of which is a correct listing:

- by the lower-cased title, then id (the `title_key` column): how the API listed titles
  before it listed them in filing order;
- filing order, as a library shelves titles: accents, case and punctuation set aside, a
  leading article dropped, numbers in numeric order (restated below as `filing_key`), ties
  by the author's filing form, then id.

`desc` is the reverse of either order. A page is `ok` when its books are that order's
slice at the page, every checked field as in the library, and `total` the library's size;
anything else is `wrong` (no listing answer is ever merely short). Restated here on
purpose: the load never imports the service's code.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ._truth import CHECKED_FIELDS, Verdict

PER_PAGE = 25
PAGES_PER_SCROLL = 3
"""Pages the web client asks for at once when a reader scrolls the library."""
ARTICLES = frozenset({"a", "an", "the", "le", "la", "les", "l", "el", "los", "las", "il",
                      "lo", "gli", "der", "die", "das", "de", "het", "een"})  # fmt: skip
_PUNCTUATION = re.compile(r"[^\w\s]")
_NUMBER = re.compile(r"\d+")


def filing_key(text: str) -> str:
    """`text` in filing order (see the module docstring)."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    words = _PUNCTUATION.sub(" ", plain).split()
    if len(words) > 1 and words[0] in ARTICLES:
        words = words[1:]
    return _NUMBER.sub(lambda number: number[0].zfill(10), " ".join(words))


@dataclass(frozen=True, slots=True)
class ListingTruth:
    """The library's books by id, and the two title orders a listing may follow."""

    books: dict[int, dict[str, object]]
    orders: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, conn: sqlite3.Connection) -> ListingTruth:
        """Both orders of every book in the library."""
        rows = conn.execute(f"SELECT {', '.join(CHECKED_FIELDS)}, title_key FROM books")
        books, keys = {}, {}
        for row in rows:
            book = dict(zip(CHECKED_FIELDS, row[:-1], strict=True))
            book_id = int(str(book["id"]))
            books[book_id] = book
            keys[book_id] = row[-1]
        by_key = sorted(books, key=lambda i: (keys[i], i))
        filed = sorted(books, key=lambda i: (*_filed(books[i]), i))
        return cls(books, (tuple(by_key), tuple(filed)))

    @property
    def pages(self) -> int:
        """How many pages of `PER_PAGE` the library fills."""
        return max(1, -(-len(self.books) // PER_PAGE))

    def judge(self, params: dict[str, str], body: bytes) -> Verdict:
        """`ok` when the answer is the page of one of the orders, else `wrong`."""
        items = _items(body, len(self.books))
        if items is None:
            return "wrong"
        start = (int(params["page"]) - 1) * PER_PAGE
        ids = [item.get("id") for item in items]
        for order in self.orders:
            ranked: Sequence[int] = order[::-1] if params["order"] == "desc" else order
            if ids == list(ranked[start : start + PER_PAGE]):
                return "ok" if all(_same_book(item, self.books) for item in items) else "wrong"
        return "wrong"


def _filed(book: dict[str, object]) -> tuple[str, str]:
    return filing_key(str(book["title"])), filing_key(str(book["author"]))


def _items(body: bytes, total: int) -> list[dict[str, object]] | None:
    """The page's books when the answer is a listing of the whole library, else None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("total") != total:
        return None
    items = answer.get("items")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    return items


def _same_book(item: dict[str, object], books: dict[int, dict[str, object]]) -> bool:
    expected = books[int(str(item["id"]))]
    return json.dumps({k: item.get(k) for k in CHECKED_FIELDS}, sort_keys=True) == json.dumps(
        expected, sort_keys=True
    )
