"""Hidden pass-to-pass tests: they pass on the base commit and must keep passing."""

from __future__ import annotations

from flask.testing import FlaskClient

NEW_BOOK = {"isbn": "978-0-261-10221-7", "title": "The Hobbit", "author": "J. R. R. Tolkien"}


def test_created_book_is_found_case_insensitively(client: FlaskClient) -> None:
    book_id = client.post("/books", json=NEW_BOOK).get_json()["id"]
    hits = client.get("/search?q=THE HOBBIT").get_json()["results"]
    assert book_id in [hit["id"] for hit in hits]


def test_listing_sorts_case_insensitively_by_title(client: FlaskClient) -> None:
    client.post("/books", json={**NEW_BOOK, "title": "a a a lower case first"})
    items = client.get("/books?sort=title&per_page=100").get_json()["items"]
    titles = [book["title"].lower() for book in items]
    assert titles == sorted(titles)
    assert items[0]["title"] == "a a a lower case first"


def test_patch_of_other_fields_keeps_title_order(client: FlaskClient) -> None:
    before = [
        book["id"] for book in client.get("/books?sort=title&per_page=50").get_json()["items"]
    ]
    client.patch(f"/books/{before[3]}", json={"status": "read", "rating": 5})
    after = [book["id"] for book in client.get("/books?sort=title&per_page=50").get_json()["items"]]
    assert after == before


def test_patch_validates_the_new_title(client: FlaskClient) -> None:
    assert client.patch("/books/3", json={"title": "   "}).status_code == 400
    assert client.patch("/books/3", json={"colour": "red"}).status_code == 400


def test_patched_title_is_returned_trimmed(client: FlaskClient) -> None:
    after = client.patch("/books/3", json={"title": "  Trimmed Title  "}).get_json()
    assert after["title"] == "Trimmed Title"
    assert client.get("/books/3").get_json()["title"] == "Trimmed Title"


def test_search_results_are_in_title_order(client: FlaskClient) -> None:
    results = client.get("/search?q=the&limit=20").get_json()["results"]
    titles = [hit["title"].lower() for hit in results]
    assert titles == sorted(titles)
