"""The pure parts of loadgen and bookmeta: rate accounting, profiles, lookup schedule."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from .conftest import STACK


@pytest.fixture(scope="module")
def products() -> Iterator[tuple[ModuleType, ModuleType]]:
    """`loadgen` and `bookmeta` imported from the stack (they are not installed packages)."""
    paths = [str(STACK / "loadgen"), str(STACK / "upstream")]
    sys.path[:0] = paths
    try:
        yield importlib.import_module("loadgen"), importlib.import_module("bookmeta")
    finally:
        for path in paths:
            sys.path.remove(path)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_achieved_rate_counts_issued_requests_over_the_window(
    products: tuple[ModuleType, ModuleType],
) -> None:
    """Achieved = issued per second over the window; right after activation the divisor is
    the elapsed time, so a fresh resume does not read as under-delivery."""
    loadgen, _ = products
    clock = Clock()
    window = loadgen.RateWindow(10, clock=clock)
    window.activate()
    for _ in range(40):
        clock.now += 0.05
        window.record()
    assert window.rate() == pytest.approx(20)
    clock.now += 20
    assert window.rate() == 0


def test_paused_window_reads_zero(products: tuple[ModuleType, ModuleType]) -> None:
    """A paused generator reports 0 achieved, never the stale rate from before."""
    loadgen, _ = products
    clock = Clock()
    window = loadgen.RateWindow(10, clock=clock)
    window.activate()
    clock.now += 1
    window.record()
    window.deactivate()
    assert window.rate() == 0


def test_search_storm_cycles_a_fixed_working_set(products: tuple[ModuleType, ModuleType]) -> None:
    """The storm repeats the same 8 queries, which is what a working cache absorbs."""
    loadgen, _ = products
    storm = loadgen.profile_named("search-storm")
    queries = [storm.request(n)[1]["q"] for n in range(32)]
    assert len(set(queries)) == 8
    assert queries[:8] == queries[8:16]
    assert list(storm.working_set) == [storm.request(n) for n in range(8)]


def test_listing_mix_is_mostly_uncached_reads(products: tuple[ModuleType, ModuleType]) -> None:
    """60 % listing pages, 30 % single books, 10 % recently added; no searches."""
    loadgen, _ = products
    paths = [loadgen.profile_named("listing-mix").request(n)[0] for n in range(100)]
    assert sum(p == "/books" for p in paths) == 70
    assert sum(p.startswith("/books/") for p in paths) == 30


def test_unknown_profile_lists_the_known_ones(products: tuple[ModuleType, ModuleType]) -> None:
    """A typo in LOAD_PROFILE fails at start with the valid names."""
    loadgen, _ = products
    with pytest.raises(ValueError, match="listing-mix, search-storm"):
        loadgen.profile_named("search")


def test_lookup_schedule_is_reproducible_from_the_seed(
    products: tuple[ModuleType, ModuleType],
) -> None:
    """Same seed, same delays; all within latency ± jitter."""
    _, bookmeta = products
    first = bookmeta.LookupSchedule(bookmeta.Pacing(seed=7))
    second = bookmeta.LookupSchedule(bookmeta.Pacing(seed=7))
    delays = [first.next()[0] for _ in range(50)]
    assert delays == [second.next()[0] for _ in range(50)]
    assert all(1.1 <= d <= 1.3 for d in delays)


def test_catalogue_isbns_are_valid_isbn13(products: tuple[ModuleType, ModuleType]) -> None:
    """The app's seeded classics resolve against these; a bad check digit would not."""
    _, bookmeta = products
    for isbn in bookmeta.CATALOGUE:
        digits = [int(d) for d in isbn]
        assert len(digits) == 13
        assert sum(d * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10 == 0
