"""The query-string rules still hold: bad values are the client's error, named, never a 500.

Hidden from the workspace: the CI gate's judge runs these in a process of its own against
the submitted service, freshly seeded and started for each test (`service`), over HTTP.
"""

from __future__ import annotations

import httpx
import pytest


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
    service: httpx.Client, url: str, named: str
) -> None:
    response = service.get(url)
    assert response.status_code == 400, url
    assert named in response.json()["error"]


def test_valid_values_are_honoured(service: httpx.Client) -> None:
    body = service.get("/search?q=the&limit=3").json()
    assert body["count"] == len(body["results"]) == 3
    assert all(hit["title"].lower().startswith("the") for hit in body["results"])
    listing = service.get("/books?sort=title&order=desc&page=2&per_page=7").json()
    assert (listing["page"], listing["per_page"], len(listing["items"])) == (2, 7, 7)
    titles = [item["title"].lower() for item in listing["items"]]
    assert titles == sorted(titles, reverse=True)
