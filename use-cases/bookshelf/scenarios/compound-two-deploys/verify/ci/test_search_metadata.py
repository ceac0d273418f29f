"""Search hits carry what the metadata service answered for their ISBN, on every search.

Hidden from the workspace: CI copies this folder under a fresh name into the tests and
runs it against the submitted code, with the hand-off commit's test configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from bookshelf import Settings, create_app
from bookshelf.seed import seed
from flask.testing import FlaskClient


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
def registry() -> EditionRegistry:
    return EditionRegistry()


@pytest.fixture
def client(tmp_path: Path, registry: EditionRegistry) -> FlaskClient:
    db_path = str(tmp_path / "library.db")
    seed(db_path, 300)
    settings = Settings(db_path=db_path, upstream_url="http://registry.test")
    app = create_app(settings, upstream_transport=httpx.MockTransport(registry.handle))
    return app.test_client()


@pytest.mark.parametrize("query", ["dune", "foundation", "the"])
def test_every_hit_carries_the_metadata_service_answer_for_its_isbn(
    client: FlaskClient, registry: EditionRegistry, query: str
) -> None:
    body = client.get(f"/search?q={query}&limit=5").get_json()
    assert body["results"], f"no hits for {query!r}"
    for hit in body["results"]:
        assert hit["metadata"] == registry.answers.get(hit["isbn"]), hit


def test_many_distinct_searches_then_repeats_keep_their_metadata(
    client: FlaskClient, registry: EditionRegistry
) -> None:
    queries = ["dune", "foundation", "neuromancer", "hyperion", "dracula", "the", "a"]
    for _ in range(3):
        for query in queries:
            for hit in client.get(f"/search?q={query}&limit=20").get_json()["results"]:
                assert hit["metadata"] == registry.answers[hit["isbn"]], hit
