"""The editions bookmeta knows about, keyed by ISBN-13.

Two sources: the curated editions below (well-known books, written out by hand) and,
when a library file is given, every other book in it, whose edition details (publisher,
pages, subjects, first publication) are derived from the ISBN alone. The derivation is
a pure function of the ISBN, so the same book always has the same edition.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Edition:
    """One edition's metadata as served by `GET /v1/books/<isbn>`."""

    isbn: str
    title: str
    authors: tuple[str, ...]
    first_published: int
    publisher: str
    pages: int
    subjects: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """The wire shape (lists instead of tuples)."""
        body = asdict(self)
        body["authors"] = list(self.authors)
        body["subjects"] = list(self.subjects)
        return body


_ROWS: tuple[tuple[str, str, str, int, str, int, str], ...] = (
    ("9780591541281", "Dune", "Frank Herbert", 1965, "Chilton Books", 412, "science fiction"),
    ("9780156834117", "Dune Messiah", "Frank Herbert", 1969, "Putnam", 256, "science fiction"),
    (
        "9780010054880",
        "The Hobbit",
        "J. R. R. Tolkien",
        1937,
        "George Allen & Unwin",
        310,
        "fantasy",
    ),
    (
        "9780121659783",
        "Nineteen Eighty-Four",
        "George Orwell",
        1949,
        "Secker & Warburg",
        328,
        "dystopia",
    ),
    ("9780781452625", "Brave New World", "Aldous Huxley", 1932, "Chatto & Windus", 311, "dystopia"),
    ("9780046877101", "Dracula", "Bram Stoker", 1897, "Archibald Constable", 418, "horror"),
    ("9780901357243", "Frankenstein", "Mary Shelley", 1818, "Lackington, Hughes", 280, "horror"),
    ("9780930246181", "Neuromancer", "William Gibson", 1984, "Ace", 271, "cyberpunk"),
    ("9780112659983", "Hyperion", "Dan Simmons", 1989, "Doubleday", 482, "science fiction"),
    ("9780132099837", "Foundation", "Isaac Asimov", 1951, "Gnome Press", 255, "science fiction"),
    (
        "9780475983855",
        "Foundation and Empire",
        "Isaac Asimov",
        1952,
        "Gnome Press",
        247,
        "science fiction",
    ),
    ("9780317840704", "Mistborn", "Brandon Sanderson", 2006, "Tor", 541, "fantasy"),
    ("9780023391538", "Sapiens", "Yuval Noah Harari", 2011, "Harvill Secker", 443, "history"),
    (
        "9780041357875",
        "The Left Hand of Darkness",
        "Ursula K. Le Guin",
        1969,
        "Ace",
        304,
        "science fiction",
    ),
    (
        "9780021260652",
        "A Wizard of Earthsea",
        "Ursula K. Le Guin",
        1968,
        "Parnassus",
        183,
        "fantasy",
    ),
    ("9780464512745", "Pride and Prejudice", "Jane Austen", 1813, "T. Egerton", 432, "classics"),
    ("9780870155048", "Moby-Dick", "Herman Melville", 1851, "Harper & Brothers", 635, "classics"),
    ("9780836554236", "Middlemarch", "George Eliot", 1871, "Blackwood", 880, "classics"),
    ("9780649943869", "The Name of the Wind", "Patrick Rothfuss", 2007, "DAW", 662, "fantasy"),
    ("9780826533838", "Snow Crash", "Neal Stephenson", 1992, "Bantam", 480, "cyberpunk"),
    ("9780622163550", "Kindred", "Octavia E. Butler", 1979, "Doubleday", 264, "science fiction"),
    ("9780199386666", "Solaris", "Stanisław Lem", 1961, "MON", 204, "science fiction"),
    ("9780122523625", "Piranesi", "Susanna Clarke", 2020, "Bloomsbury", 272, "fantasy"),
    (
        "9780245740107",
        "Station Eleven",
        "Emily St. John Mandel",
        2014,
        "Knopf",
        333,
        "literary fiction",
    ),
)

CATALOGUE: dict[str, Edition] = {
    isbn: Edition(isbn, title, (author,), year, publisher, pages, (subject,))
    for isbn, title, author, year, publisher, pages, subject in _ROWS
}

_PUBLISHERS = (
    "Harrow & Finch", "Bellwether Press", "Quarry House", "Lindenfield", "Northlight Books",
    "Saltmarsh Editions", "Corvid & Wren", "Meridian House", "Tallow Street Press",
    "Greyfriars", "Amberline", "Old Pier Books",
)  # fmt: skip
_SUBJECTS = (
    "literary fiction", "mystery", "historical fiction", "romance", "science fiction",
    "fantasy", "travel", "poetry", "biography", "adventure", "short stories", "nature",
)  # fmt: skip


def derived_edition(isbn: str, title: str, author: str) -> Edition:
    """The edition of a library book outside the curated set, a pure function of its ISBN."""
    digest = hashlib.sha256(isbn.encode()).digest()
    first = digest[3] % len(_SUBJECTS)
    second = (first + 1 + digest[4] % (len(_SUBJECTS) - 1)) % len(_SUBJECTS)
    subjects = (_SUBJECTS[first],) if digest[5] % 2 else (_SUBJECTS[first], _SUBJECTS[second])
    return Edition(
        isbn=isbn,
        title=title,
        authors=(author,),
        first_published=1950 + int.from_bytes(digest[:2]) % 75,
        publisher=_PUBLISHERS[digest[2] % len(_PUBLISHERS)],
        pages=90 + int.from_bytes(digest[6:8]) % 811,
        subjects=subjects,
    )


class Catalogue:
    """The curated editions plus, for a library, a derived edition for each of its books."""

    def __init__(self, library: dict[str, tuple[str, str]] | None = None) -> None:
        self._library = dict(library or {})

    def get(self, isbn: str) -> Edition | None:
        """The edition with this ISBN, or None when it is not in the catalogue."""
        curated = CATALOGUE.get(isbn)
        if curated is not None:
            return curated
        book = self._library.get(isbn)
        return None if book is None else derived_edition(isbn, *book)

    def __len__(self) -> int:
        return len(CATALOGUE.keys() | self._library.keys())


def load_catalogue(library: Path | None) -> Catalogue:
    """The catalogue for the SQLite library at `library` (opened read-only), or curated only.

    Raises ValueError naming the file when it cannot be read as a library.
    """
    if library is None:
        return Catalogue()
    try:
        conn = sqlite3.connect(f"{library.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT isbn, title, author FROM books").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise ValueError(f"library {library}: cannot read its books table: {error}") from None
    return Catalogue({str(isbn): (str(title), str(author)) for isbn, title, author in rows})
