"""The stack's three processes for real: upstream pacing, load-generator behaviour, and the
scenario's physics (the fault breaks the latency objective under load, the fix restores it)."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import (
    FIX_PATCH,
    STACK,
    Component,
    Launcher,
    app_repo,
    histogram_buckets,
    quantile,
    seed_library,
    start_app,
    start_bookmeta,
    start_loadgen,
)

pytestmark = pytest.mark.integration
DUNE = "9780591541281"
LATENCY = "bookshelf_http_request_duration_seconds"


def _metric(component: Component, line_prefix: str) -> float:
    text = httpx.get(f"{component.url}/metrics", timeout=5).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(line_prefix)]  # fmt: skip
    return float(sum(values))


def _p99_under_load(app: Component, seconds: float) -> float:
    before = histogram_buckets(httpx.get(f"{app.url}/metrics").text, LATENCY)
    time.sleep(seconds)  # the load runs meanwhile; we sample a window of it
    after = histogram_buckets(httpx.get(f"{app.url}/metrics").text, LATENCY)
    return quantile(0.99, before, after)


async def _timed_lookup(port: int, isbn: str) -> tuple[float, bytes]:
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /v1/books/{isbn} HTTP/1.1\r\nHost: bookmeta\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()
    response = await reader.read()
    writer.close()
    return time.monotonic() - started, response


async def test_bookmeta_serves_hundreds_of_slow_lookups_concurrently(launch: Launcher) -> None:
    """~1.2 s per lookup, yet 300 lookups at once all finish in a few lookup times (no
    queueing: one at a time they would take 360 s, and 8 s means at least 45 at once,
    about twice what the load keeps in flight); responses carry no server banner;
    unknown ISBNs are 404."""
    bookmeta = start_bookmeta(launch)
    started = time.monotonic()
    results = await asyncio.gather(*(_timed_lookup(bookmeta.port, DUNE) for _ in range(300)))
    elapsed = time.monotonic() - started
    assert all(r.startswith(b"HTTP/1.1 200") for _, r in results)
    assert min(t for t, _ in results) >= 1.05
    # A bound, not a speed goal: a loaded 2-core machine takes 2-5 s here.
    assert elapsed < 8.0, f"300 concurrent lookups took {elapsed:.2f}s (queued?)"
    async with httpx.AsyncClient(base_url=bookmeta.url, timeout=5) as client:
        response = await client.get(f"/v1/books/{DUNE}")
        unknown = await client.get("/v1/books/9790000000000")
    assert response.json()["title"] == "Dune"
    assert "server" not in response.headers
    assert unknown.status_code == 404


def test_bookmeta_error_rate_is_exact_and_evenly_spread(launch: Launcher) -> None:
    """At rate 0.25 exactly every 4th lookup answers 503, immediately, and it is counted."""
    bookmeta = start_bookmeta(launch, "--latency-seconds", "0", "--error-rate", "0.25")
    with httpx.Client(base_url=bookmeta.url, timeout=5) as client:
        codes = [client.get(f"/v1/books/{DUNE}").status_code for _ in range(40)]
    assert [n for n, code in enumerate(codes) if code == 503] == list(range(3, 40, 4))
    assert (
        _metric(bookmeta, 'bookmeta_requests_total{endpoint="/v1/books/{isbn}",status="503"}') == 10
    )


@pytest.mark.timeout(150)
def test_fault_breaks_the_objective_and_the_fix_restores_it(
    launch: Launcher, tmp_path: Path
) -> None:
    """Under the scenario's storm (20 rps) the faulted app's p99 is far above 0.3 s while the
    load generator holds its rate regardless; the fixed build, warmed, stays far below."""
    library = seed_library(tmp_path / "faulted.db")
    bookmeta = start_bookmeta(launch, library=library)
    faulted = start_app(launch, app_repo(tmp_path / "faulted", faulted=True), library, bookmeta)
    storm = start_loadgen(launch, faulted, 20, "--profile", "search-storm", "--window-seconds",
                          "5", truth_db=library)  # fmt: skip
    time.sleep(3)  # let the slow requests pile up to steady state
    p99_faulted = _p99_under_load(faulted, 6)
    achieved = _metric(storm, "loadgen_achieved_rps")
    inflight = _metric(storm, "loadgen_inflight")
    assert p99_faulted > 1.0, f"faulted p99 {p99_faulted:.3f}s"
    assert achieved >= 18, f"load generator fell to {achieved} rps against a slow target"
    assert inflight >= 10, f"only {inflight} requests in flight: the generator waits on responses"
    storm.stop()
    fixed = start_app(launch, app_repo(tmp_path / "fixed", faulted=True, patch=FIX_PATCH),
                      tmp_path / "fixed.db", bookmeta)  # fmt: skip
    storm = start_loadgen(launch, fixed, 20, "--profile", "search-storm", "--paused",
                          truth_db=tmp_path / "fixed.db")  # fmt: skip
    warmup = httpx.post(f"{storm.url}/warmup", timeout=30).json()
    assert warmup["requests"] == warmup["ok"] == 48
    assert warmup["seconds"] < 10, f"warm-up took {warmup['seconds']}s"
    httpx.post(f"{storm.url}/resume", timeout=5).raise_for_status()
    p99_fixed = _p99_under_load(fixed, 6)
    assert p99_fixed < 0.1, f"fixed p99 {p99_fixed:.3f}s"


def test_loadgen_pause_resume_and_clean_exit(launch: Launcher, tmp_path: Path) -> None:
    """Paused issues nothing and says so; resumed it issues again; SIGTERM exits 0."""
    bookmeta = start_bookmeta(launch, "--latency-seconds", "0")
    app = start_app(launch, app_repo(tmp_path / "app"), tmp_path / "app.db", bookmeta)
    load = start_loadgen(launch, app, 50, "--profile", "listing-mix", "--paused")
    assert _metric(load, "loadgen_paused") == 1
    assert _metric(load, "loadgen_target_rps") == 50
    assert _metric(load, "loadgen_requests_total") == 0
    httpx.post(f"{load.url}/resume", timeout=5).raise_for_status()
    deadline = time.monotonic() + 10
    while _metric(load, "loadgen_requests_total") < 50:
        assert time.monotonic() < deadline, "no load issued within 10s of resume"
        time.sleep(0.1)
    status = httpx.post(f"{load.url}/pause", timeout=5).json()
    assert status["paused"] is True
    assert _metric(load, "loadgen_achieved_rps") == 0
    assert _metric(app, 'bookshelf_http_requests_total{endpoint="/books"') > 0
    assert load.stop() == 0
    assert app.stop() == 0
    assert bookmeta.stop() == 0


@pytest.mark.timeout(120)
def test_the_truth_is_what_the_real_app_answers(launch: Launcher, tmp_path: Path) -> None:
    """The healthy app over real bookmeta (with the library, no latency) answers every
    query of the working set exactly as the load's truth expects: same books in the same
    order, same fields, same editions. The truth is restated, not imported, so this is
    what keeps the two in step."""
    library = seed_library(tmp_path / "app.db")
    bookmeta = start_bookmeta(launch, "--latency-seconds", "0", "--jitter-seconds", "0",
                              library=library)  # fmt: skip
    app = start_app(launch, app_repo(tmp_path / "app"), library, bookmeta)
    load = start_loadgen(launch, app, 1, "--profile", "search-storm", "--paused",
                         truth_db=library)  # fmt: skip
    sys.path.insert(0, str(STACK / "loadgen"))
    try:
        loadgen = importlib.import_module("loadgen")
    finally:
        sys.path.remove(str(STACK / "loadgen"))
    storm = loadgen.profile_named("search-storm", library, 1)
    searches = storm.searches
    with httpx.Client(base_url=app.url, timeout=10) as client:
        for query in [*searches.warm, *searches.queries]:
            body = client.get("/search", params={"q": query, "limit": "2"}).content
            assert searches.truth.judge(query, body) == "ok", (query, body[:300])
            hits = json.loads(body)["results"]
            assert [h["id"] for h in hits] == [e.row["id"] for e in searches.truth.expected(query)]
    warmup = httpx.post(f"{load.url}/warmup", timeout=30).json()
    assert warmup["requests"] == warmup["ok"] == len(searches.warm)
    checked = _metric(load, 'loadgen_responses_checked_total{result="ok"}')
    assert checked == len(searches.warm)
