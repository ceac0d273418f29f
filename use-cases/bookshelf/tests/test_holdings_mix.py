"""loadgen's `holdings-mix` profile: readers asking where to borrow a book (three requests
in four, over the whole library) and a title-listing page, every answer judged."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def mix(loadgen: ModuleType, library: Path) -> Any:
    """The holdings-mix profile over the seeded library (seed 1, as stack.toml runs it)."""
    return loadgen.profile_named("holdings-mix", library, 1)


def test_three_requests_in_four_ask_for_holdings_across_the_library(
    mix: Any, loadgen: ModuleType
) -> None:
    """The fourth is a title-listing page; the holdings spread over the library, so a
    minute's books (15/s) are mostly new the next minute: a cache of them keeps few."""
    assert loadgen.HOLDINGS_EVERY == 4
    sent = [mix.request(n) for n in range(2400)]
    holdings = [path for path, _ in sent if path.endswith("/holdings")]
    assert len(holdings) == 1800
    assert all(sent[n][0] == "/books" for n in range(3, 2400, 4))
    first = {mix.request(n)[0] for n in range(1200) if n % 4 != 3}
    second = {mix.request(n)[0] for n in range(1200, 2400) if n % 4 != 3}
    assert len(first) > 850
    assert len(first & second) / len(second) < 0.1
    assert mix.request(7) == mix.request(7)
    assert len(mix.working_set) == 16


def _answer(mix: Any, book_id: int, at: float | None = None, **changes: Any) -> bytes:
    """The app's answer for `book_id`, its counts those bookmeta gave at `at` (now)."""
    book = dict(mix.holdings.listing.books[book_id], status="want", rating=None)
    moment = time.time() if at is None else at
    [counts] = mix.holdings._holdings(str(book["isbn"]), moment, moment)
    body = {"book": book, "holdings": counts}
    for key, value in changes.items():
        body[key] = value
    return json.dumps(body).encode()


def test_a_holdings_answer_is_ok_degraded_or_wrong(mix: Any) -> None:
    """The book with the service's counts is ok; with null holdings degraded; another
    book, made-up counts or no answer wrong."""
    path, params = mix.request(0)
    book_id = int(path.split("/")[2])
    sent = (path, params)
    assert mix.check(sent, _answer(mix, book_id)) == "ok"
    assert mix.check(sent, _answer(mix, book_id, holdings=None)) == "degraded"
    other = next(i for i in mix.holdings.listing.books if i != book_id)
    assert mix.check(sent, _answer(mix, other)) == "wrong"
    counts = json.loads(_answer(mix, book_id))["holdings"]
    made_up = {**counts, "available": int(counts["available"]) + 1}
    assert mix.check(sent, _answer(mix, book_id, holdings=made_up)) == "wrong"
    assert mix.check(sent, b"<html>busy</html>") == "wrong"
    assert mix.check(sent, b'{"error": "internal error"}') == "wrong"


def test_counts_kept_from_before_the_request_are_wrong(mix: Any) -> None:
    """The copies on a shelf change every ten seconds: counts the app asked for while the
    request was under way are ok (however long it took), counts it kept from a minute
    earlier (a cache, a table fetched at start) are wrong for most books."""
    sent_at = time.time()
    stale = 0
    books = [int(mix.request(n)[0].split("/")[2]) for n in range(200) if n % 4 != 3]
    for n, book_id in enumerate(books):
        sent = (f"/books/{book_id}/holdings", {})
        assert mix.check(sent, _answer(mix, book_id, sent_at), sent_at) == "ok"
        asked_late = mix.check(sent, _answer(mix, book_id), sent_at - 30)
        assert asked_late == "ok", n
        stale += mix.check(sent, _answer(mix, book_id, sent_at - 60), sent_at) == "wrong"
    assert stale > 0.6 * len(books), (stale, len(books))
