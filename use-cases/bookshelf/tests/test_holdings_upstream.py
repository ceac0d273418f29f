"""bookmeta's holdings: a quick count per ISBN the app must not cache, a function of the
ISBN and the time (so the load can check every answer, and counts kept from earlier are
stale), and a 404 for a book it does not know."""

from __future__ import annotations

import asyncio
import time
from types import ModuleType

import httpx
import pytest

pytestmark = pytest.mark.timeout(60)

_ISBN = "9780591541281"  # Dune, a curated edition


def _get(app: object, *paths: str) -> list[tuple[int, dict[str, object], float]]:
    async def all_at_once() -> list[tuple[int, dict[str, object], float]]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://bookmeta") as client:

            async def one(path: str) -> tuple[int, dict[str, object], float]:
                started = time.perf_counter()
                answer = await client.get(path)
                return answer.status_code, answer.json(), time.perf_counter() - started

            return list(await asyncio.gather(*(one(path) for path in paths)))

    return asyncio.run(all_at_once())


def test_holdings_are_a_quick_count_of_the_moment(bookmeta: ModuleType) -> None:
    """Twenty at once all answer in ~80 ms (no queue, unlike a `brownout` lookup), each the
    counts of that ISBN at some moment of the exchange: libraries 1-12, available at most
    that."""
    app = bookmeta.create_app(bookmeta.Pacing(latency_seconds=1.2), None)
    started = time.time()
    answers = _get(app, *[f"/v1/holdings/{_ISBN}"] * 20)
    possible = [str(h) for h in bookmeta.holdings_between(_ISBN, started, time.time())]
    assert {status for status, _, _ in answers} == {200}
    assert all(0.06 <= seconds < 0.5 for _, _, seconds in answers), answers
    assert {str(body) for _, body, _ in answers} <= set(possible), (answers, possible)
    counts = [bookmeta.holdings(f"97800000{n:05d}", started) for n in range(500)]
    assert all(1 <= int(str(c["libraries"])) <= 12 for c in counts)
    assert all(0 <= int(str(c["available"])) <= int(str(c["libraries"])) for c in counts)
    assert len({(c["libraries"], c["available"]) for c in counts}) > 30


def test_the_copies_on_a_shelf_change_every_ten_seconds_each_book_at_its_own_moment(
    bookmeta: ModuleType,
) -> None:
    """How many libraries hold a book never changes; the copies on a shelf do, every
    `SHELF_CHANGE_SECONDS`, books at different moments: counts kept from a minute earlier
    are wrong for most books, and `holdings_between` is every answer a span could give."""
    every = bookmeta.SHELF_CHANGE_SECONDS
    assert every == 10.0
    isbns = [f"97800000{n:05d}" for n in range(500)]
    now = 1_800_000_000.0
    before = [bookmeta.holdings(isbn, now - 60) for isbn in isbns]
    after = [bookmeta.holdings(isbn, now) for isbn in isbns]
    assert all(a["libraries"] == b["libraries"] for a, b in zip(after, before, strict=True))
    stale = sum(a != b for a, b in zip(after, before, strict=True))
    assert stale > 0.6 * len(isbns), stale
    changes = [
        next(t for t in range(1, 101) if bookmeta.holdings(isbn, now + t / 10) != after[i])
        for i, isbn in enumerate(isbns[:50])
        if bookmeta.holdings(isbn, now + every) != after[i]
    ]
    assert len(changes) > 30
    assert all(t <= 100 for t in changes)
    assert len(set(changes)) > 10, changes  # not all at once
    for isbn, counts in zip(isbns[:50], after[:50], strict=True):
        assert bookmeta.holdings_between(isbn, now, now) == [counts]
        span = bookmeta.holdings_between(isbn, now - every, now)
        assert len(span) == 2
        assert span[-1] == counts
        assert bookmeta.holdings(isbn, now - every) == span[0]


def test_holdings_of_an_unknown_book_are_a_404_and_are_counted(bookmeta: ModuleType) -> None:
    """An ISBN outside the catalogue is a 404; both answers show in the service's metrics
    under the holdings route template."""
    app = bookmeta.create_app(
        bookmeta.Pacing(latency_seconds=1.2), None, None, bookmeta.HoldingsPacing(0.0)
    )
    missing, known = _get(app, "/v1/holdings/9780000000000", f"/v1/holdings/{_ISBN}")
    assert (missing[0], known[0]) == (404, 200)
    text = _text(app, "/metrics")
    assert 'bookmeta_requests_total{endpoint="/v1/holdings/{isbn}",status="404"} 1.0' in text
    assert 'bookmeta_requests_total{endpoint="/v1/holdings/{isbn}",status="200"} 1.0' in text


def _text(app: object, path: str) -> str:
    async def fetch() -> str:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://bookmeta") as client:
            return (await client.get(path)).text

    return asyncio.run(fetch())
