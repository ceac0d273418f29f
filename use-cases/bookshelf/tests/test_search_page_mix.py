"""loadgen's `search-page-mix` profile: readers leafing through the title listing, and one
request in 25 a search from the search page (6 hits), its titles in turn."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import APP, PYTHON

pytestmark = pytest.mark.timeout(180)

# The healthy app's answers over the library, without metadata (the upstream answers 404):
# rows and current pages, to hold the load's truth to what the app really answers.
_ANSWERS = """
import json, sys, httpx
from bookshelf import Settings, create_app
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://registry.test"),
                 upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
client = app.test_client()
out = {}
for q in json.loads(sys.argv[2]):
    out[q] = client.get("/search", query_string={"q": q, "limit": sys.argv[3]}).get_json()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def mix(loadgen: ModuleType, library: Path) -> Any:
    """The search-page-mix profile over the seeded library (seed 1, as stack.toml runs it)."""
    return loadgen.profile_named("search-page-mix", library, 1)


def test_one_request_in_25_is_a_search_page(mix: Any, loadgen: ModuleType) -> None:
    """The other 24 are single title-listing pages, both orders, spread over the library:
    nothing but the search page reads the progress table."""
    every = loadgen.PAGE_SEARCH_EVERY
    assert every == 25
    sent = [mix.request(n) for n in range(5000)]
    searches = [params for path, params in sent if path == "/search"]
    assert len(searches) == 5000 // every
    assert all(path == "/search" for path, _ in sent[every - 1 :: every])
    assert {params["limit"] for params in searches} == {str(loadgen.PAGE_LIMIT)}
    listings = [params for path, params in sent if path == "/books"]
    assert {p["sort"] for p in listings} == {"title"}
    assert {p["order"] for p in listings} == {"asc", "desc"}
    assert len({p["page"] for p in listings}) > 700


def test_titles_come_back_in_turn_within_one_cache_ttl(mix: Any, loadgen: ModuleType) -> None:
    """Each title is asked for once per rotation, and a rotation at 20 requests/s is shorter
    than the metadata cache's TTL at time scale 0.1 (30 s): a book read once per TTL stays
    cached, so a working build keeps every book of the search page after warm-up."""
    page = mix.search_page
    count = len(page.titles)
    assert count == 16
    for k in range(3 * count):
        assert page.query(k) in page.titles[k % count].spellings
    rotation_seconds = count * loadgen.PAGE_SEARCH_EVERY / 20
    assert rotation_seconds <= 20 < 30
    assert [params["q"] for _, params in mix.working_set] == [t.title for t in page.titles]


def test_a_spelling_comes_back_only_after_the_others(mix: Any) -> None:
    """Each visit of a title sends its next spelling: the same query string is at least
    five minutes apart, so no cache of search answers kept for a minute ever answers."""
    page = mix.search_page
    assert min(len(t.spellings) for t in page.titles) >= 16
    last: dict[str, int] = {}
    for k in range(5000):
        query = page.query(k)
        if query in last:
            assert (k - last[query]) * 1.25 >= 300
        last[query] = k


def test_every_search_page_fills_its_result_list(mix: Any, loadgen: ModuleType) -> None:
    """Every spelling the page can send finds exactly 6 books of its title: each search
    page costs the app 6 progress lookups."""
    page = mix.search_page
    for title in page.titles:
        expected = {tuple(h.row["id"] for h in page.truth.expected(q)) for q in title.spellings}
        assert len(expected) == 1
        (ids,) = expected
        assert len(ids) == loadgen.PAGE_LIMIT


def test_the_truth_is_what_the_app_answers(mix: Any, library: Path, loadgen: ModuleType) -> None:
    """Rows, order and current pages of the healthy app's search equal the load's truth for
    a sample of spellings of every title (metadata aside: no upstream here)."""
    page = mix.search_page
    queries = sorted({q for t in page.titles for q in t.spellings[:3]})
    done = subprocess.run(
        [PYTHON, "-c", _ANSWERS, str(library), json.dumps(queries), str(loadgen.PAGE_LIMIT)],
        cwd=APP, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    for query in queries:
        want = [{k: h.row[k] for k in ("id", "title", "current_page")}
                for h in page.truth.expected(query)]  # fmt: skip
        got = [{k: hit[k] for k in ("id", "title", "current_page")}
               for hit in answers[query]["results"]]  # fmt: skip
        assert got == want, query


def test_a_wrong_search_page_is_judged_wrong(mix: Any) -> None:
    """Searches are judged against the page's truth (6 hits), not the storm's (2 hits)."""
    page = mix.search_page
    query = page.titles[0].spellings[0]
    hits = [{**h.row, "metadata": h.metadata} for h in page.truth.expected(query)]
    right = json.dumps({"query": query, "count": len(hits), "results": hits}).encode()
    short = json.dumps({"query": query, "count": 2, "results": hits[:2]}).encode()
    sent = ("/search", {"q": query, "limit": "6"})
    assert mix.check(sent, right) == "ok"
    assert mix.check(sent, short) == "degraded"
    assert mix.check(sent, b"[]") == "wrong"


def test_search_page_mix_needs_the_library(loadgen: ModuleType) -> None:
    """Like the other profiles that search, it refuses to start without `--truth-db`."""
    with pytest.raises(ValueError, match="--truth-db"):
        loadgen.profile_named("search-page-mix")
