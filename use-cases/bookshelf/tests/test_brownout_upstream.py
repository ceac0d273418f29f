"""bookmeta's `brownout` profile: a replica of fixed capacity that browns out under
sustained traffic and keeps working for callers that have gone.

Pure where it can be (the lookup schedule on a fake clock); the capacity and the queue
timeout through the ASGI app itself, in one event loop; the abandoned-work property
against a real bookmeta server (integration marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import ModuleType

import httpx
import pytest

from .conftest import PYTHON, STACK, Clock, Launcher

pytestmark = pytest.mark.timeout(120)

_ISBN = "9780591541281"  # Dune, a curated edition


def _schedule(bookmeta: ModuleType, clock: Clock) -> object:
    profile = bookmeta.PROFILES["brownout"]
    pacing = bookmeta.Pacing(
        profile.latency_seconds,
        profile.jitter_seconds,
        profile.error_rate,
        7,
        busy_above_rate=profile.busy_above_rate,
        brownout_seconds=profile.brownout_seconds,
        brownout_every_seconds=profile.brownout_every_seconds,
        brownout_latency_seconds=profile.brownout_latency_seconds,
    )
    return bookmeta.LookupSchedule(pacing, clock=clock)


def test_brownout_comes_only_with_sustained_traffic_and_recurs(bookmeta: ModuleType) -> None:
    """Quiet traffic and a burst after a quiet second (a warm-up, a round of refreshes)
    are served at ~0.4 s; sustained traffic (30/s) browns it out for 3 s at 2 s a lookup,
    and again 30 s after that brownout began; a quiet gap ends it."""
    clock = Clock()
    schedule = _schedule(bookmeta, clock)

    def traffic(per_second: int, seconds: float) -> list[tuple[float, float]]:
        seen = []
        for _ in range(int(per_second * seconds)):
            clock.now += 1 / per_second
            delay, fails = schedule.next()  # type: ignore[attr-defined]
            assert not fails
            seen.append((clock.now, delay))
        return seen

    assert all(d < 0.5 for _, d in traffic(per_second=80, seconds=1)), "a burst"
    assert all(d < 0.5 for _, d in traffic(per_second=3, seconds=20)), "refreshes"
    clock.now += 2
    warm = traffic(per_second=30, seconds=5)
    assert all(d < 0.5 for _, d in warm), "not yet sustained"
    storm = traffic(per_second=30, seconds=70)
    slow = [t for t, d in storm if d > 1.5]
    assert slow, "sustained traffic browns it out"
    first = slow[0]
    assert [t for t in slow if t < first + 10] == pytest.approx(
        [t for t, _ in storm if first <= t < first + 3], abs=1e-9
    )
    assert any(first + 29 < t < first + 34 for t in slow), "again 30 s later"
    clock.now += 2
    assert all(d < 0.5 for _, d in traffic(per_second=80, seconds=1)), "a quiet gap ends it"


def test_capacity_queues_lookups_and_refuses_those_that_waited_too_long(
    bookmeta: ModuleType,
) -> None:
    """Two slots of 0.2 s and a 0.3 s queue timeout: of six lookups at once, two answer
    at ~0.2 s, two at ~0.4 s, and two are refused with a 503 at ~0.3 s."""
    pacing = bookmeta.Pacing(latency_seconds=0.2, jitter_seconds=0.0)
    app = bookmeta.create_app(pacing, None, bookmeta.Capacity(2, 0.3))

    async def six() -> list[tuple[int, float]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bookmeta") as client:
            started = time.perf_counter()

            async def one() -> tuple[int, float]:
                response = await client.get(f"/v1/books/{_ISBN}")
                return response.status_code, time.perf_counter() - started

            return list(await asyncio.gather(*(one() for _ in range(6))))

    answers = sorted(asyncio.run(six()), key=lambda a: a[1])
    assert [status for status, _ in answers].count(200) == 4
    assert [status for status, _ in answers].count(503) == 2
    refused = [t for status, t in answers if status == 503]
    assert all(0.25 < t < 0.39 for t in refused), refused
    assert max(t for status, t in answers if status == 200) > 0.35


@pytest.mark.integration
def test_abandoned_lookups_keep_their_turn(launch: Launcher) -> None:
    """40 lookups whose callers give up after 0.3 s still take the service's 16 slots in
    turn (~1.2 s of work): a lookup sent after them waits its turn behind them."""
    brownout_server = launch(
        "bookmeta",
        [PYTHON, "-m", "bookmeta", "--port", "{port}", "--profile", "brownout"],
        cwd=STACK / "upstream",
    ).url

    async def abandon() -> None:
        # Given up 0.3 s after being sent (a lookup takes ~0.4 s), however long the
        # connection took on a busy box: a lookup that never reached the service (its
        # caller gone before the server read it) would hold no turn, and prove nothing.
        timeout = httpx.Timeout(0.3, connect=10.0)
        async with httpx.AsyncClient(base_url=brownout_server, timeout=timeout) as client:

            async def one() -> None:
                with contextlib.suppress(httpx.TimeoutException):
                    await client.get(f"/v1/books/{_ISBN}")

            await asyncio.gather(*(one() for _ in range(40)))

    asyncio.run(abandon())
    started = time.perf_counter()
    response = httpx.get(f"{brownout_server}/v1/books/{_ISBN}", timeout=10)
    waited = time.perf_counter() - started
    assert response.status_code == 200
    assert waited > 0.5, f"answered in {waited:.2f} s: the abandoned work was dropped"
