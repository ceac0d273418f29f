"""Holdings: how many libraries of the lending network hold a book, and how many copies
are on a shelf right now.

A live service's counts change by the minute, so its callers must not cache them; here
they are a pure function of the ISBN, so a load generator can check every answer.
"""

from __future__ import annotations

import hashlib
import random

HOLDINGS_SECONDS = 0.08
"""How long a holdings answer takes by default (± a fifth of it): a quick count, unlike
an edition lookup."""


def holdings(isbn: str) -> dict[str, object]:
    """The holdings of the book with this ISBN, as `GET /v1/holdings/<isbn>` answers them."""
    digest = hashlib.blake2b(f"holdings:{isbn}".encode(), digest_size=8).digest()
    libraries = 1 + digest[0] % 12
    return {"isbn": isbn, "libraries": libraries, "available": digest[1] % (libraries + 1)}


class HoldingsPacing:
    """How long each holdings answer takes: `seconds` ± a fifth, reproducible from `seed`."""

    def __init__(self, seconds: float = HOLDINGS_SECONDS, seed: int = 7) -> None:
        if seconds < 0:
            raise ValueError(f"holdings seconds must not be negative, got {seconds}")
        self._seconds = seconds
        self._random = random.Random(seed)

    def next(self) -> float:
        """The delay of the next answer, in seconds."""
        spread = self._seconds / 5
        return max(0.0, self._seconds + self._random.uniform(-spread, spread))
