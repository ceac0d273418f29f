"""Search hits carry what the metadata service answered for their ISBN, on every search.

Hidden from the workspace: the CI gate's judge runs these in a process of its own against
the submitted service, freshly seeded and started for each test (`service`), over HTTP;
the metadata service it reaches is the judge's stub (`upstream`), answering as below.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sreforge_deployer.judging import StubUpstream


class EditionRegistry:
    """A metadata service whose answers the library's own rows cannot reproduce."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}

    def handle(self, request: httpx.Request) -> httpx.Response:
        isbn = request.url.path.rsplit("/", 1)[-1]
        answer = {
            "isbn": isbn,
            "title": f"Registry edition {isbn[-4:]}",
            "authors": [f"Registry author {isbn[-3:]}"],
            "publisher": f"House {int(isbn[-2:]) % 7}",
        }
        self.answers[isbn] = answer
        return httpx.Response(200, json=answer)


@pytest.fixture
def registry(upstream: StubUpstream) -> EditionRegistry:
    found = EditionRegistry()
    upstream.handler = found.handle
    return found


@pytest.mark.parametrize("query", ["dune", "foundation", "the"])
def test_every_hit_carries_the_metadata_service_answer_for_its_isbn(
    service: httpx.Client, registry: EditionRegistry, query: str
) -> None:
    body = service.get(f"/search?q={query}&limit=5").json()
    assert body["results"], f"no hits for {query!r}"
    for hit in body["results"]:
        assert hit["metadata"] == registry.answers.get(hit["isbn"]), hit


def test_many_distinct_searches_then_repeats_keep_their_metadata(
    service: httpx.Client, registry: EditionRegistry
) -> None:
    queries = ["dune", "foundation", "neuromancer", "hyperion", "dracula", "the", "a"]
    for _ in range(3):
        for query in queries:
            for hit in service.get(f"/search?q={query}&limit=20").json()["results"]:
                assert hit["metadata"] == registry.answers[hit["isbn"]], hit
