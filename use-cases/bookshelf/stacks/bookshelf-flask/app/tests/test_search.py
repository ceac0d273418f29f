from __future__ import annotations

from flask.testing import FlaskClient

from tests.conftest import StaticMetadataService


def test_search_matches_title_prefix_case_insensitively(client: FlaskClient) -> None:
    body = client.get("/search?q=DUNE").get_json()
    assert [hit["title"] for hit in body["results"]] == ["Dune", "Dune Messiah"]
    assert body["count"] == 2


def test_search_results_carry_upstream_metadata(client: FlaskClient) -> None:
    hit = client.get("/search?q=neuromancer").get_json()["results"][0]
    assert hit["metadata"]["authors"] == ["William Gibson"]
    assert hit["metadata"]["isbn"] == hit["isbn"]


def test_unknown_editions_have_no_metadata(client: FlaskClient) -> None:
    results = client.get("/search?q=the silent&limit=3").get_json()["results"]
    assert results
    assert all(hit["metadata"] is None for hit in results)


def test_upstream_outage_degrades_to_results_without_metadata(
    client: FlaskClient, upstream: StaticMetadataService
) -> None:
    upstream.failing = True
    response = client.get("/search?q=hyperion")
    assert response.status_code == 200
    assert response.get_json()["results"][0]["metadata"] is None


def test_search_honours_limit(client: FlaskClient) -> None:
    assert client.get("/search?q=the&limit=2").get_json()["count"] == 2
    assert client.get("/search?q=the&limit=50").status_code == 400


def test_empty_query_is_rejected(client: FlaskClient) -> None:
    assert client.get("/search?q=%20").status_code == 400


def test_no_match_is_an_empty_result(client: FlaskClient, upstream: StaticMetadataService) -> None:
    body = client.get("/search?q=zzzz").get_json()
    assert body == {"query": "zzzz", "count": 0, "results": []}
    assert upstream.calls == []
