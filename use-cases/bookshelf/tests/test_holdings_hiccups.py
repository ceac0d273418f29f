"""bookmeta's `holdings-hiccups` profile: a lending network that counts one book at a time,
pauses now and then to sync, and keeps counting for callers that have gone.

The stall on a fake clock; the turns and the refusals through the ASGI app in one event
loop; the abandoned-work property against a real bookmeta server (integration marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from types import ModuleType

import httpx
import pytest

from .conftest import PYTHON, STACK, Clock, Launcher

pytestmark = pytest.mark.timeout(120)

_ISBN = "9780591541281"  # Dune, a curated edition


def test_a_count_waits_out_a_stall_it_starts_in_or_runs_into(bookmeta: ModuleType) -> None:
    """A 0.1 s stall every 10 s from the service's start: a count at 0.04 s into one takes
    the stall's 0.06 s left more than its own time (0.04 s ± a fifth); one starting 0.01 s
    before the next stall takes the whole stall more; between stalls, only its own."""
    clock = Clock()
    pacing = bookmeta.HoldingsPacing(
        0.04, 7, stall_seconds=0.1, stall_every_seconds=10.0, clock=clock
    )
    clock.now = 120.04
    in_stall = pacing.next()
    clock.now = 125.0
    between = pacing.next()
    clock.now = 129.99
    into_stall = pacing.next()
    assert 0.09 <= in_stall <= 0.11, in_stall
    assert 0.03 <= between <= 0.05, between
    assert 0.13 <= into_stall <= 0.15, into_stall
    clock.now = 130.0  # 30 s after the start: the next stall begins
    assert pacing.stalled_for() == pytest.approx(0.1)


def test_a_stall_must_be_shorter_than_its_period(bookmeta: ModuleType) -> None:
    """A stall as long as its period would never end: refused, naming both figures."""
    with pytest.raises(ValueError, match=r"0\.5 s every 0\.5 s"):
        bookmeta.HoldingsPacing(0.04, stall_seconds=0.5, stall_every_seconds=0.5)


def test_counts_take_turns_and_a_long_wait_is_refused(bookmeta: ModuleType) -> None:
    """One count at a time of ~0.1 s and a 0.25 s queue timeout: of six at once, the
    served ones end one after another, and those that waited past 0.25 s answer 503."""
    app = bookmeta.create_app(
        bookmeta.Pacing(),
        None,
        None,
        bookmeta.HoldingsPacing(0.1),
        bookmeta.Capacity(1, 0.25),
    )

    async def six() -> list[tuple[int, float]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bookmeta") as client:
            started = time.perf_counter()

            async def one() -> tuple[int, float]:
                response = await client.get(f"/v1/holdings/{_ISBN}")
                return response.status_code, time.perf_counter() - started

            return list(await asyncio.gather(*(one() for _ in range(6))))

    answers = asyncio.run(six())
    served = sorted(t for status, t in answers if status == 200)
    refused = [t for status, t in answers if status == 503]
    assert len(served) >= 2, answers
    assert refused, answers
    assert len(served) + len(refused) == 6, answers
    assert all(later - earlier >= 0.07 for earlier, later in itertools.pairwise(served)), served
    assert all(t >= 0.24 for t in refused), refused


def test_the_profile_counts_one_book_at_a_time_with_hiccups(bookmeta: ModuleType) -> None:
    """The profile's figures, as the scenario's sizing reads them (`environment/scenario.env`
    of retry-storm): ~20 counts a second, a 0.15 s pause every 10 s."""
    profile = bookmeta.PROFILES["holdings-hiccups"]
    assert profile.holdings_capacity == 1
    assert profile.holdings_seconds is not None
    assert 1 / profile.holdings_seconds == pytest.approx(20)
    assert (profile.holdings_stall_seconds, profile.holdings_stall_every_seconds) == (0.15, 10.0)


@pytest.mark.integration
def test_abandoned_counts_keep_their_turn(launch: Launcher) -> None:
    """20 counts whose callers give up after 0.05 s still take the one slot in turn (~1 s
    of work): a count asked after them waits behind them."""
    bookmeta = launch(
        "bookmeta",
        [PYTHON, "-m", "bookmeta", "--port", "{port}", "--profile", "holdings-hiccups"],
        cwd=STACK / "upstream",
    )

    async def abandon() -> None:
        # Given up 0.05 s after being sent however long the connection took: a count that
        # never reached the service would hold no turn, and prove nothing.
        timeout = httpx.Timeout(0.05, connect=10.0)
        async with httpx.AsyncClient(base_url=bookmeta.url, timeout=timeout) as client:

            async def one() -> None:
                with contextlib.suppress(httpx.TimeoutException):
                    await client.get(f"/v1/holdings/{_ISBN}")

            await asyncio.gather(*(one() for _ in range(20)))

    asyncio.run(abandon())
    started = time.perf_counter()
    response = httpx.get(f"{bookmeta.url}/v1/holdings/{_ISBN}", timeout=10)
    waited = time.perf_counter() - started
    assert response.status_code == 200
    assert waited > 0.3, f"answered in {waited:.2f} s: the abandoned counts were dropped"
