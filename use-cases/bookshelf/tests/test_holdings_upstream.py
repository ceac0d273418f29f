"""bookmeta's holdings: a quick count per ISBN the app must not cache, the same for the
same ISBN (so the load can check every answer), and a 404 for a book it does not know."""

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


def test_holdings_are_a_quick_count_fixed_per_isbn(bookmeta: ModuleType) -> None:
    """Twenty at once all answer in ~80 ms (no queue, unlike a `brownout` lookup), each the
    same counts for the same ISBN: libraries 1-12, available at most that."""
    app = bookmeta.create_app(bookmeta.Pacing(latency_seconds=1.2), None)
    answers = _get(app, *[f"/v1/holdings/{_ISBN}"] * 20)
    assert {status for status, _, _ in answers} == {200}
    assert all(0.06 <= seconds < 0.5 for _, _, seconds in answers), answers
    assert {str(body) for _, body, _ in answers} == {str(bookmeta.holdings(_ISBN))}
    counts = [bookmeta.holdings(f"97800000{n:05d}") for n in range(500)]
    assert all(1 <= int(str(c["libraries"])) <= 12 for c in counts)
    assert all(0 <= int(str(c["available"])) <= int(str(c["libraries"])) for c in counts)
    assert len({(c["libraries"], c["available"]) for c in counts}) > 30


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
