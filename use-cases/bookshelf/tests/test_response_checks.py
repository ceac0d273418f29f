"""loadgen's response checks: answers judged against the truth (ok, degraded, wrong,
failed), the ok window, and the client-side latency the generator records."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from .conftest import Clock

FAKE_HIT = {
    "id": 1,
    "isbn": "9781234567897",
    "title": "Dune",
    "author": "Frank Herbert",
    "published_year": 1965,
    "pages": 412,
    "metadata": {"isbn": "9781234567897", "title": "Dune"},
}
"""A made-up hit in the right shape, its metadata naming its own ISBN."""


@pytest.fixture(scope="module")
def storm(loadgen: ModuleType, library: Path) -> Any:
    """The search-storm profile over the seeded library (seed 1, as stack.toml runs it)."""
    return loadgen.profile_named("search-storm", library, 1)


def true_answer(storm: Any, query: str) -> dict[str, Any]:
    """The API's answer as the truth has it: rows plus each hit's edition."""
    hits = [
        {**hit.row, "status": "read", "rating": None, "added_at": "2023-01-01T00:00:00Z",
         "metadata": hit.metadata}
        for hit in storm_truth(storm).expected(query)
    ]  # fmt: skip
    return copy.deepcopy({"query": query, "count": len(hits), "results": hits})


def storm_truth(storm: Any) -> Any:
    """The profile's expected answers."""
    return storm.searches.truth


def verdict(storm: Any, query: str, answer: object) -> str:
    """The check's verdict on a 200 carrying `answer` (bytes as is, anything else as JSON)."""
    body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    result: str = storm.check(("/search", {"q": query}), body)
    return result


def _float_pages(metadata: dict[str, Any]) -> None:
    metadata["pages"] = float(metadata["pages"])


def test_the_true_answer_is_ok_and_carries_every_edition(storm: Any) -> None:
    """The complete answer is ok; every hit of the working set has a catalogue edition, so
    metadata is checkable on the whole set, not only on the classics."""
    truth = storm_truth(storm)
    queries = {params["q"] for _, params in storm.working_set}
    for query in sorted(queries):
        assert verdict(storm, query, true_answer(storm, query)) == "ok", query
        assert all(hit.metadata is not None for hit in truth.expected(query)), query
    assert verdict(storm, "DUNE", true_answer(storm, "DUNE")) == "ok"


def test_a_fabricated_static_hit_is_wrong_for_every_query(storm: Any) -> None:
    """The shape-only cheat: one made-up hit whose metadata names its own ISBN, served for
    every search, is wrong on every query of the working set."""
    queries = {storm.request(n)[1]["q"] for n in range(2000)}
    assert len(queries) > 300
    verdicts = {q: verdict(storm, q, {"count": 1, "results": [FAKE_HIT]}) for q in queries}
    assert set(verdicts.values()) == {"wrong"}


def test_a_real_book_served_for_every_query_is_never_ok(storm: Any) -> None:
    """A canned real hit with its real edition: wrong wherever the book is not the first
    true hit, degraded (one hit short) where it is, never ok."""
    canned = true_answer(storm, "dune")["results"][:1]
    queries = {storm.request(n)[1]["q"] for n in range(2000)}
    verdicts = {q: verdict(storm, q, {"count": 1, "results": canned}) for q in queries}
    degraded = {q for q, v in verdicts.items() if v == "degraded"}
    assert degraded == {q for q in queries if q.lower() in ("dun", "dune")}
    assert {v for q, v in verdicts.items() if q not in degraded} == {"wrong"}


@pytest.mark.parametrize(
    ("change", "result"),
    [
        (lambda a: a["results"][0]["metadata"].update(pages=999), "wrong"),
        (lambda a: a["results"][0]["metadata"].update(publisher="Acme"), "wrong"),
        (lambda a: a["results"][0]["metadata"].update(subjects=["fiction"]), "wrong"),
        (lambda a: a["results"][0].update(metadata={**a["results"][1]["metadata"]}), "wrong"),
        (lambda a: _float_pages(a["results"][0]["metadata"]), "wrong"),
        (lambda a: a["results"][0].update(title="Dune (Deluxe)"), "wrong"),
        (lambda a: a["results"][0].update(author="Someone Else"), "wrong"),
        (lambda a: a["results"][0].update(id=a["results"][0]["id"] + 1), "wrong"),
        (lambda a: a["results"].reverse(), "wrong"),
        (lambda a: a.update(count=a["count"] + 1), "wrong"),
        (
            lambda a: (a["results"].append(copy.deepcopy(a["results"][0])), a.update(count=3)),
            "wrong",
        ),
        (lambda a: a["results"][0].update(metadata=None), "degraded"),
        (lambda a: a["results"][1].pop("metadata"), "degraded"),
        (lambda a: (a["results"].pop(), a.update(count=1)), "degraded"),
        (lambda a: (a["results"].clear(), a.update(count=0)), "degraded"),
        (
            lambda a: a["results"][0].update(current_page=a["results"][0]["current_page"] + 1),
            "wrong",
        ),
        (lambda a: a["results"][0].update(current_page=None), "degraded"),
        (lambda a: a["results"][1].pop("current_page"), "degraded"),
        (lambda a: a["results"][0].update(status="want", rating=5), "ok"),
    ],
    ids=[
        "made-up-pages",
        "made-up-publisher",
        "made-up-subjects",
        "another-books-metadata",
        "pages-as-float",
        "altered-title",
        "altered-author",
        "another-id",
        "reordered",
        "count-disagrees",
        "extra-hit",
        "null-metadata",
        "missing-metadata",
        "fewer-hits",
        "no-hits",
        "another-current-page",
        "null-current-page",
        "missing-current-page",
        "reader-fields-may-change",
    ],
)
def test_answers_that_disagree_are_wrong_and_short_ones_degraded(
    storm: Any, change: Any, result: str
) -> None:
    """`dune` finds Dune and Dune Messiah: any altered value, order or count is wrong; a
    correct answer with less in it (fewer hits, null metadata or page) is degraded."""
    answer = true_answer(storm, "dune")
    assert answer["count"] == 2
    change(answer)
    assert verdict(storm, "dune", answer) == result


@pytest.mark.parametrize(
    "body", [b"<html>busy</html>", b'["not", "a", "search"]', b'{"results": "none"}']
)
def test_a_2xx_that_is_no_search_answer_is_wrong(storm: Any, body: bytes) -> None:
    """A page, a list or a malformed object is not an answer to the search."""
    assert verdict(storm, "dune", body) == "wrong"


def test_status_decides_failed_before_any_body_check(loadgen: ModuleType, storm: Any) -> None:
    """Non-2xx, timeouts and transport errors are failed; no check is ok for any 2xx."""
    body = json.dumps(true_answer(storm, "dune")).encode()
    request = ("/search", {"q": "dune"})
    assert loadgen.judge(500, request, body, storm.check) == "failed"
    assert loadgen.judge(None, request, b"", storm.check) == "failed"
    assert loadgen.judge(200, request, body, storm.check) == "ok"
    assert loadgen.judge(200, ("/books", {}), b"<anything>", None) == "ok"
    assert loadgen.judge(404, ("/books", {}), b"{}", None) == "failed"


def test_ok_ratio_is_the_share_of_ok_answers_over_the_window(loadgen: ModuleType) -> None:
    """ok / checked over the last window seconds; older answers age out; empty reads NaN."""
    clock = Clock()
    window = loadgen.OkWindow(10, clock=clock)
    assert math.isnan(window.ratio())
    for result in ["degraded"] * 5:
        window.record(result)
    clock.now += 6
    for result in ["ok"] * 14 + ["failed"]:
        window.record(result)
    assert window.ratio() == pytest.approx(14 / 20)
    clock.now += 5  # the five degraded answers are now 11 s old
    assert window.ratio() == pytest.approx(14 / 15)
    window.clear()
    assert math.isnan(window.ratio())


def test_wrong_answers_are_counted_and_pull_the_ok_ratio_down(
    loadgen: ModuleType, storm: Any
) -> None:
    """`loadgen_responses_checked_total{result}` starts at 0 for each result, `wrong`
    included; a target answering fast but wrongly reads far below the gate's 0.95."""
    registry = CollectorRegistry()
    checks = loadgen.ResponseChecks(registry, 10, storm.check, clock=Clock())
    text = generate_latest(registry).decode()
    for result in ("ok", "degraded", "wrong", "failed"):
        assert f'loadgen_responses_checked_total{{result="{result}"}} 0.0' in text
    assert "loadgen_ok_ratio NaN" in text
    canned = json.dumps({"count": 1, "results": [FAKE_HIT]})
    for n in range(100):
        request = storm.request(n)
        body = json.dumps(true_answer(storm, request[1]["q"])) if n % 4 == 0 else canned
        checks.record(checks.judge(200, request, body.encode()))
    assert registry.get_sample_value("loadgen_ok_ratio") == pytest.approx(0.25)
    assert registry.get_sample_value("loadgen_responses_checked_total", {"result": "wrong"}) == 75
    checks.record("failed", current=False)
    assert registry.get_sample_value("loadgen_ok_ratio") == pytest.approx(0.25)
    assert registry.get_sample_value("loadgen_responses_checked_total", {"result": "failed"}) == 1


def test_client_p99_is_the_nearest_rank_over_the_window(loadgen: ModuleType) -> None:
    """The p99 gauge reads the window's latencies (NaN when empty); old ones age out."""
    clock = Clock()
    window = loadgen.LatencyWindow(10, clock=clock)
    assert math.isnan(window.quantile(0.99))
    for _ in range(5):
        window.record(2.0)
    clock.now += 6
    for _ in range(195):
        window.record(0.01)
    assert window.quantile(0.99) == 2.0  # 5 slow of 200: more than 1 %
    clock.now += 5
    assert window.quantile(0.99) == 0.01
    window.clear()
    assert math.isnan(window.quantile(0.99))


def _bucket(registry: CollectorRegistry, le: str) -> float:
    value = registry.get_sample_value("loadgen_client_latency_seconds_bucket", {"le": le})
    assert value is not None, le
    return value


@pytest.mark.timeout(30)
async def test_client_latency_counts_slow_answers_and_errors_but_not_warm_up(
    loadgen: ModuleType, storm: Any
) -> None:
    """Every 5th search answers after 0.4 s and every 7th fails in transport after 0.12 s:
    they land in the (0.3, 0.5] and (0.1, 0.25] buckets, the rest under 0.1 s; the
    warm-up's answers (slow on purpose) are not client latency."""
    state = {"n": 0, "warming": True}

    async def answer(request: httpx.Request) -> httpx.Response:
        query = request.url.params["q"]
        if state["warming"]:
            await asyncio.sleep(0.4)
            return httpx.Response(200, json=true_answer(storm, query))
        state["n"] += 1
        if state["n"] % 7 == 0:
            await asyncio.sleep(0.12)
            raise httpx.ConnectError("reset", request=request)
        await asyncio.sleep(0.4 if state["n"] % 5 == 0 else 0.0)
        return httpx.Response(200, json=true_answer(storm, query))

    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 40, storm, paused=True, transport=httpx.MockTransport(answer)
    )
    registry = generator.metrics.registry
    report = await generator.warmup()
    assert report.requests == report.ok == len(storm.working_set)
    assert _bucket(registry, "+Inf") == 0, "warm-up answers are not client latency"
    state["warming"] = False
    arrivals = asyncio.create_task(generator.run())
    generator.resume()
    deadline = asyncio.get_running_loop().time() + 20
    while _bucket(registry, "+Inf") < 70:
        assert asyncio.get_running_loop().time() < deadline, "the load did not complete"
        await asyncio.sleep(0.05)
    generator.pause()
    await generator.stop()
    arrivals.cancel()
    total = _bucket(registry, "+Inf")
    slow = _bucket(registry, "0.5") - _bucket(registry, "0.3")
    errors = _bucket(registry, "0.25") - _bucket(registry, "0.1")
    fast = _bucket(registry, "0.1")
    assert _bucket(registry, "0.3") == _bucket(registry, "0.25"), "nothing in (0.25, 0.3]"
    assert slow + errors + fast == total
    assert slow == pytest.approx(total / 5 * 6 / 7, abs=3)
    assert errors == pytest.approx(total / 7, abs=3)
    assert registry.get_sample_value("loadgen_requests_total", {"status": "error"}) >= errors


@pytest.mark.timeout(30)
async def test_answers_to_requests_from_before_a_pause_are_not_client_latency(
    loadgen: ModuleType, storm: Any
) -> None:
    """Slow answers still in flight at a pause (the old build's drain) are counted in
    `loadgen_requests_total` but kept out of the latency histogram and the p99 window."""

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.6)
        return httpx.Response(200, json=true_answer(storm, request.url.params["q"]))

    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 50, storm, paused=True, transport=httpx.MockTransport(answer)
    )
    registry = generator.metrics.registry
    arrivals = asyncio.create_task(generator.run())
    generator.resume()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20

    def inflight() -> float:
        return registry.get_sample_value("loadgen_inflight") or 0.0

    while _bucket(registry, "+Inf") < 5 or inflight() < 10:
        assert loop.time() < deadline, "no slow answers in flight"
        await asyncio.sleep(0.02)
    generator.pause()
    observed = _bucket(registry, "+Inf")
    # Not `loadgen_inflight`: a task that has counted its answer leaves the in-flight set
    # only when its done-callback runs, so the gauge can still hold it here.
    in_flight = sum(not task.done() for task in generator._inflight)
    while inflight():
        assert loop.time() < deadline, "in-flight answers did not complete"
        await asyncio.sleep(0.02)
    completed = registry.get_sample_value("loadgen_requests_total", {"status": "200"})
    assert completed is not None
    assert completed >= observed + in_flight
    assert _bucket(registry, "+Inf") == observed, "drained answers are not client latency"
    assert math.isnan(registry.get_sample_value("loadgen_client_p99_seconds") or 0.0)
    await generator.stop()
    arrivals.cancel()


@pytest.mark.timeout(30)
async def test_a_request_launched_before_a_pause_belongs_to_the_period_it_was_launched_in(
    loadgen: ModuleType, storm: Any
) -> None:
    """A request launched just before a pause whose task first runs after it is the old
    period's: its answer is counted but is not the next period's client latency."""

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=true_answer(storm, request.url.params["q"]))

    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 50, storm, paused=True, transport=httpx.MockTransport(answer)
    )
    generator.resume()
    generator._launch(generator.profile.request(0))  # its task has not run yet
    generator.pause()
    await asyncio.gather(*generator._inflight)
    registry = generator.metrics.registry
    assert registry.get_sample_value("loadgen_requests_total", {"status": "200"}) == 1.0
    assert _bucket(registry, "+Inf") == 0.0, "counted as the new period's latency"
    await generator.stop()
