"""The pure parts of loadgen and bookmeta: rate accounting, profiles, lookup schedule."""

from __future__ import annotations

import importlib
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, get_args

import pytest
from sreforge_contracts import ScenarioEnv, UpstreamProfile

from .conftest import STACK, Clock


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


def test_achieved_rate_follows_the_schedule_not_a_lagging_loop(
    products: tuple[ModuleType, ModuleType],
) -> None:
    """A generator whose loop lags 1.5 s behind its schedule (a starved host), sending
    every arrival late, reads its true 20/s, not the lag; arrivals dropped after a
    stall are missing and show."""
    loadgen, _ = products
    clock = Clock()
    window = loadgen.RateWindow(10, clock=clock)
    window.activate()
    start = clock.now
    for n in range(100):  # scheduled over 5 s, each sent 1.5 s late
        at = start + n * 0.05
        clock.now = at + 1.5
        window.record(at)
        window.advance(at + 0.05)
    assert window.rate() == pytest.approx(20)
    lagging = loadgen.RateWindow(10, clock=clock)  # the same arrivals by their send time
    clock.now = start
    lagging.activate()
    clock.now = start + 6.5
    for n in range(100):
        lagging.record(start + n * 0.05 + 1.5)
    assert lagging.rate() < 16, "by send time a 1.5 s lag reads as under-delivery"
    window.advance(clock.now + 3)  # a stall: the schedule restarted, 3 s of arrivals dropped
    clock.now += 3
    assert window.rate() < 15
    frozen = window.rate()
    clock.now += 5  # the loop stalls outright: the window trails the clock by 2 s at most
    assert window.rate() < frozen


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


def _draws(storm: Any, count: int) -> list[str]:
    return [storm.request(n)[1]["q"] for n in range(count)]


def test_working_set_is_broad_seeded_and_skewed(
    products: tuple[ModuleType, ModuleType], library: Path
) -> None:
    """Over 1,000 distinct queries from the library's titles and title prefixes, the
    classics among them; the same draws for the same seed, other draws for another; a few
    queries carry much of the load (Zipf-like), none is absent for long."""
    loadgen, _ = products
    storm = loadgen.profile_named("search-storm", library, 1)
    searches = storm.searches
    assert len(set(searches.queries)) == len(searches.queries) >= 1000
    titles = {q.lower() for q in searches.warm}
    classics = {"dune", "the hobbit", "neuromancer", "foundation", "hyperion", "dracula",
                "mistborn", "sapiens", "middlemarch", "moby-dick"}  # fmt: skip
    assert classics <= titles
    assert all(any(t.startswith(q.lower()) for t in titles) for q in searches.queries)
    again = loadgen.profile_named("search-storm", library, 1)
    other = loadgen.profile_named("search-storm", library, 2)
    draws = _draws(storm, 3000)
    assert draws == _draws(again, 3000)
    assert draws != _draws(other, 3000)
    assert set(searches.queries) != set(other.searches.queries)
    shares = sorted((searches.share(q) for q in searches.queries), reverse=True)
    assert sum(shares[: len(shares) // 10]) > 0.3, "the top tenth carries a third"
    assert shares[0] > 20 * shares[len(shares) // 2], "the head is far above the median"
    assert len(set(draws)) > 500


def test_warm_up_brings_in_every_book_the_load_asks_for(
    products: tuple[ModuleType, ModuleType], library: Path
) -> None:
    """The arithmetic in `_searches.py`: after the warm-up (one search per title, <= 2 books
    each, at most 64 at once) no query needs a book outside the cache, and every book is
    read often enough at 20 searches/s to stay cached through a 30 s TTL (scale 0.1)."""
    loadgen, _ = products
    storm = loadgen.profile_named("search-storm", library, 1)
    searches = storm.searches
    warmed = searches.warmed_books()
    asked = {h.isbn for q in searches.queries for h in searches.truth.expected(q)}
    assert asked == warmed
    assert len(storm.working_set) <= 64
    assert {params["limit"] for _, params in storm.working_set} == {"2"}
    assert {storm.request(n)[1]["limit"] for n in range(500)} == {"2"}
    assert max(len(searches.truth.expected(q)) for q in searches.warm) <= 2
    per_search = sum(searches.share(q) * len(searches.truth.expected(q)) for q in searches.queries)
    assert 20 * per_search * 1.3 < 64 * 0.75, "a cacheless build keeps threads to spare"
    least = min(searches.book_share(isbn) for isbn in warmed)
    assert 20 * least * 30 >= 8, f"least-read book: {least:.4f} of searches"


def test_search_storm_needs_the_library(
    products: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    """Without `--truth-db`, or with a file that is no library, the storm refuses to start
    and names the flag and the file."""
    loadgen, _ = products
    with pytest.raises(ValueError, match="--truth-db"):
        loadgen.profile_named("search-storm")
    with pytest.raises(loadgen.TruthError, match="no such file"):
        loadgen.profile_named("search-storm", tmp_path / "missing.db")
    (tmp_path / "junk.db").write_text("not a database")
    with pytest.raises(loadgen.TruthError, match=r"junk\.db"):
        loadgen.profile_named("search-storm", tmp_path / "junk.db")


def test_search_suggest_is_the_storm_with_a_cache_buster_on_every_fourth(
    products: tuple[ModuleType, ModuleType], library: Path
) -> None:
    """The same queries as the storm, in the same order; every 4th search also carries the
    suggestion box's `_` parameter (a distinct value each time), the others only q and limit;
    the answer check ignores it."""
    loadgen, _ = products
    storm = loadgen.profile_named("search-storm", library, 1)
    suggest = loadgen.profile_named("search-suggest", library, 1)
    sent = [suggest.request(n)[1] for n in range(400)]
    assert [p["q"] for p in sent] == [storm.request(n)[1]["q"] for n in range(400)]
    busted = [p for p in sent if "_" in p]
    assert len(busted) == 100
    assert all(set(p) == {"q", "limit", "_"} for p in busted)
    assert len({p["_"] for p in busted}) == 100
    assert all(set(p) == {"q", "limit"} for p in sent if "_" not in p)
    assert suggest.working_set == storm.working_set
    assert suggest.check is not None
    empty = b'{"query": "x", "count": 0, "results": []}'
    assert suggest.check(("/search", sent[3]), empty) == "degraded"
    with pytest.raises(ValueError, match="--truth-db"):
        loadgen.profile_named("search-suggest")


def test_listing_mix_is_mostly_uncached_reads(products: tuple[ModuleType, ModuleType]) -> None:
    """60 % listing pages, 30 % single books, 10 % recently added; no searches."""
    loadgen, _ = products
    paths = [loadgen.profile_named("listing-mix").request(n)[0] for n in range(100)]
    assert sum(p == "/books" for p in paths) == 70
    assert sum(p.startswith("/books/") for p in paths) == 30


def test_unknown_profile_lists_the_known_ones(products: tuple[ModuleType, ModuleType]) -> None:
    """A typo in LOAD_PROFILE fails at start with the valid names."""
    loadgen, _ = products
    known = "listing-mix, search-page-mix, search-storm, search-suggest"
    with pytest.raises(ValueError, match=known):
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


def test_upstream_profiles_are_the_ones_a_scenario_may_name(
    products: tuple[ModuleType, ModuleType],
) -> None:
    """bookmeta's profile table and scenario.env's UPSTREAM_PROFILE agree, steady by default."""
    _, bookmeta = products
    assert sorted(bookmeta.PROFILES) == sorted(get_args(UpstreamProfile))
    default = ScenarioEnv.model_fields["upstream_profile"].default
    assert default == bookmeta.DEFAULT_PROFILE
    assert bookmeta.PROFILES["steady"].error_rate == 0.0


def test_flaky_lookups_fail_fast_on_a_share_of_sustained_traffic(
    products: tuple[ModuleType, ModuleType],
) -> None:
    """`flaky-lookups` answers every lookup of quiet traffic (a warm-up's burst, a working
    cache's refreshes) and 8 % of sustained traffic (30/s) with an instant 503."""
    _, bookmeta = products
    profile = bookmeta.PROFILES["flaky-lookups"]
    clock = Clock()
    pacing = bookmeta.Pacing(
        error_rate=profile.error_rate, seed=7, busy_above_rate=profile.busy_above_rate
    )
    schedule = bookmeta.LookupSchedule(pacing, clock=clock)

    def traffic(per_second: int, seconds: int) -> list[tuple[float, bool]]:
        lookups = []
        for _ in range(per_second * seconds):
            clock.now += 1 / per_second
            lookups.append(schedule.next())
        return lookups

    assert not any(fails for _, fails in traffic(per_second=80, seconds=1)), "a burst"
    assert not any(fails for _, fails in traffic(per_second=5, seconds=20)), "quiet"
    traffic(per_second=30, seconds=5)  # five whole seconds make the traffic sustained
    sustained = traffic(per_second=30, seconds=100)
    failed = [delay for delay, fails in sustained if fails]
    assert len(failed) == pytest.approx(0.08 * len(sustained), abs=2)
    assert set(failed) == {0.0}, "a refused lookup answers at once: it adds no latency"
    clock.now += 2  # a redeploy's quiet gap, then its warm-up's burst
    assert not any(fails for _, fails in traffic(per_second=80, seconds=1)), "a warm-up"


def test_catalogue_isbns_are_valid_isbn13(products: tuple[ModuleType, ModuleType]) -> None:
    """The app's seeded classics resolve against these; a bad check digit would not."""
    _, bookmeta = products
    for isbn in bookmeta.CATALOGUE:
        digits = [int(d) for d in isbn]
        assert len(digits) == 13
        assert sum(d * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10 == 0


def test_every_seeded_book_has_a_deterministic_edition(
    products: tuple[ModuleType, ModuleType], library: Path
) -> None:
    """With the library, bookmeta knows every seeded ISBN: the curated editions as written,
    the others derived from the ISBN alone (same edition on every load); unknown ISBNs
    stay unknown, and without a library only the curated editions exist."""
    _, bookmeta = products
    catalogue = bookmeta.load_catalogue(library)
    again = bookmeta.load_catalogue(library)
    with sqlite3.connect(library) as conn:
        books = conn.execute("SELECT isbn, title, author FROM books ORDER BY id").fetchall()
    assert len(books) == 20_000
    assert len(catalogue) == 20_006, "every seeded book, plus 6 curated ones not in it"
    assert catalogue.get("9780591541281") == bookmeta.CATALOGUE["9780591541281"]
    editions = [catalogue.get(isbn) for isbn, _, _ in books[18:400]]
    assert editions == [again.get(isbn) for isbn, _, _ in books[18:400]]
    for edition, (isbn, title, author) in zip(editions, books[18:400], strict=True):
        assert edition is not None
        assert (edition.isbn, edition.title, edition.authors) == (isbn, title, (author,))
        assert edition.publisher
        assert edition.subjects
        assert 90 <= edition.pages <= 900
        assert 1950 <= edition.first_published <= 2024
    assert len({e.publisher for e in editions}) > 5
    assert len({e.pages for e in editions}) > 100
    assert catalogue.get("9781234567897") is None
    assert bookmeta.load_catalogue(None).get(books[500][0]) is None
