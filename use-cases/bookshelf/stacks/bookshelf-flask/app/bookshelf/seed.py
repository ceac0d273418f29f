"""Fill a database with a reproducible library: `python -m bookshelf.seed --db PATH`."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from .db import connect, init_schema

# Well-known titles first, so searches for them find real editions.
CLASSICS: tuple[tuple[str, str, str, int, int], ...] = (
    ("9780591541281", "Dune", "Frank Herbert", 1965, 412),
    ("9780156834117", "Dune Messiah", "Frank Herbert", 1969, 256),
    ("9780010054880", "The Hobbit", "J. R. R. Tolkien", 1937, 310),
    ("9780121659783", "Nineteen Eighty-Four", "George Orwell", 1949, 328),
    ("9780781452625", "Brave New World", "Aldous Huxley", 1932, 311),
    ("9780046877101", "Dracula", "Bram Stoker", 1897, 418),
    ("9780901357243", "Frankenstein", "Mary Shelley", 1818, 280),
    ("9780930246181", "Neuromancer", "William Gibson", 1984, 271),
    ("9780112659983", "Hyperion", "Dan Simmons", 1989, 482),
    ("9780132099837", "Foundation", "Isaac Asimov", 1951, 255),
    ("9780475983855", "Foundation and Empire", "Isaac Asimov", 1952, 247),
    ("9780317840704", "Mistborn", "Brandon Sanderson", 2006, 541),
    ("9780023391538", "Sapiens", "Yuval Noah Harari", 2011, 443),
    ("9780041357875", "The Left Hand of Darkness", "Ursula K. Le Guin", 1969, 304),
    ("9780021260652", "A Wizard of Earthsea", "Ursula K. Le Guin", 1968, 183),
    ("9780464512745", "Pride and Prejudice", "Jane Austen", 1813, 432),
    ("9780870155048", "Moby-Dick", "Herman Melville", 1851, 635),
    ("9780836554236", "Middlemarch", "George Eliot", 1871, 880),
)

_ADJECTIVES = (
    "Silent", "Crimson", "Hollow", "Last", "Broken", "Golden", "Quiet", "Burning", "Winter",
    "Paper", "Glass", "Iron", "Wandering", "Northern", "Secret", "Forgotten", "Salt", "Bright",
    "Lonely", "Velvet",
)  # fmt: skip
_NOUNS = (
    "Harbor", "Orchard", "Lantern", "River", "Garden", "Kingdom", "Letters", "Mirror", "Tide",
    "Meridian", "Archive", "Cartographer", "Season", "Lighthouse", "Frontier", "Library",
    "Compass", "Vineyard", "Mountain", "Island",
)  # fmt: skip
_PLACES = ("Ashford", "Kellan Bay", "the Marsh", "Old Vienna", "the North", "Larkspur")
_FIRST = ("Ada", "Tomas", "Mira", "Jonah", "Lena", "Oskar", "Priya", "Felix", "Ines", "Ravi",
          "Hana", "Marcus", "Noor", "Elena", "Kofi", "Sofia")  # fmt: skip
_LAST = ("Lindqvist", "Okafor", "Moreau", "Castellano", "Brandt", "Nakamura", "Ferreira",
         "Holloway", "Petrov", "Adeyemi", "Quinn", "Varga", "Iversen", "Sato")  # fmt: skip
_STATUSES = ("want", "want", "reading", "read", "read", "read")
_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


def isbn13(twelve_digits: str) -> str:
    """Append the ISBN-13 check digit."""
    total = sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(twelve_digits))
    return twelve_digits + str((10 - total % 10) % 10)


def _title(rng: random.Random) -> str:
    adjective, noun = rng.choice(_ADJECTIVES), rng.choice(_NOUNS)
    pattern = rng.randrange(4)
    if pattern == 0:
        return f"The {adjective} {noun}"
    if pattern == 1:
        return f"{adjective} {noun}"
    if pattern == 2:
        return f"{noun} of {rng.choice(_PLACES)}"
    return f"A {noun} for {rng.choice(_FIRST)}"


def generate(count: int, seed: int = 1) -> Iterator[tuple[object, ...]]:
    """`count` rows (classics first), identical for identical arguments."""
    rng = random.Random(seed)
    for n in range(count):
        if n < len(CLASSICS):
            isbn, title, author, year, pages = CLASSICS[n]
        else:
            isbn = isbn13(f"979{n:09d}")
            title = _title(rng)
            author = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
            year, pages = rng.randrange(1950, 2025), rng.randrange(90, 900)
        added = _EPOCH + timedelta(minutes=n * 53 + rng.randrange(50))
        rating = rng.randrange(1, 6) if rng.random() < 0.4 else None
        yield (isbn, title, title.lower(), author, author.lower(), year, pages,
               rng.choice(_STATUSES), rating, added.strftime("%Y-%m-%dT%H:%M:%SZ"))  # fmt: skip


def seed(path: str, count: int, seed_value: int = 1) -> int:
    """Replace the books in the database at `path` with `count` generated rows."""
    conn = connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        init_schema(conn)
        with conn:
            conn.execute("DELETE FROM books")
            conn.executemany(
                "INSERT INTO books (isbn, title, title_key, author, author_key, published_year,"
                " pages, status, rating, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                generate(count, seed_value),
            )
        conn.execute("ANALYZE")
        return int(conn.execute("SELECT COUNT(*) FROM books").fetchone()[0])
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bookshelf.seed", description=__doc__)
    parser.add_argument("--db", required=True, help="SQLite file to (re)fill")
    parser.add_argument("--books", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    total = seed(args.db, args.books, args.seed)
    print(f"seeded {total} books into {args.db} in {time.perf_counter() - started:.2f}s")


if __name__ == "__main__":
    main()
