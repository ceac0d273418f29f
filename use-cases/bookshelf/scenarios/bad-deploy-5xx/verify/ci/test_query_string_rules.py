"""The query-string rules still hold: bad values are the client's error, named, never a 500.

Hidden from the workspace: CI copies this folder under a fresh name into the tests and
runs it against the submitted code, with the hand-off commit's test configuration.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from bookshelf import Settings, create_app
from bookshelf.seed import seed
from flask.testing import FlaskClient


@pytest.fixture
def client(tmp_path: Path) -> FlaskClient:
    db_path = str(tmp_path / "library.db")
    seed(db_path, 300)
    settings = Settings(db_path=db_path, upstream_url="http://registry.test")
    app = create_app(
        settings, upstream_transport=httpx.MockTransport(lambda _: httpx.Response(404))
    )
    return app.test_client()


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("/search?q=dune&limit=0", "limit"),
        ("/search?q=dune&limit=21", "limit"),
        ("/search?q=dune&limit=two", "limit"),
        ("/search?q=%20%20", "q"),
        ("/search", "q"),
        ("/books?sort=colour", "sort"),
        ("/books?order=sideways", "order"),
        ("/books?page=0", "page"),
        ("/books?per_page=101", "per_page"),
    ],
)
def test_bad_values_are_rejected_with_400_naming_the_parameter(
    client: FlaskClient, url: str, named: str
) -> None:
    response = client.get(url)
    assert response.status_code == 400, url
    assert named in response.get_json()["error"]


def test_valid_values_are_honoured(client: FlaskClient) -> None:
    body = client.get("/search?q=the&limit=3").get_json()
    assert body["count"] == len(body["results"]) == 3
    assert all(hit["title"].lower().startswith("the") for hit in body["results"])
    listing = client.get("/books?sort=title&order=desc&page=2&per_page=7").get_json()
    assert (listing["page"], listing["per_page"], len(listing["items"])) == (2, 7, 7)
    titles = [item["title"].lower() for item in listing["items"]]
    assert titles == sorted(titles, reverse=True)
