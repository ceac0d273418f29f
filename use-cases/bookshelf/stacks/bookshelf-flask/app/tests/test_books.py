from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

NEW_BOOK: dict[str, Any] = {
    "isbn": "978-1-4028-9462-6",
    "title": "The Dispossessed",
    "author": "Ursula K. Le Guin",
    "published_year": 1974,
}


def test_listing_is_paginated_with_total(client: FlaskClient) -> None:
    body = client.get("/books?page=2&per_page=10").get_json()
    assert body["page"] == 2
    assert body["per_page"] == 10
    assert body["total"] == 300
    assert len(body["items"]) == 10


def test_listing_sorts_by_title_both_ways(client: FlaskClient) -> None:
    ascending = client.get("/books?sort=title&per_page=50").get_json()["items"]
    descending = client.get("/books?sort=title&order=desc&per_page=50").get_json()["items"]
    titles = [book["title"].lower() for book in ascending]
    assert titles == sorted(titles)
    assert descending[0]["title"].lower() >= descending[-1]["title"].lower()


def test_listing_sorts_by_author(client: FlaskClient) -> None:
    items = client.get("/books?sort=author&per_page=40").get_json()["items"]
    authors = [book["author"].lower() for book in items]
    assert authors == sorted(authors)


def test_listing_rejects_unknown_sort_and_bad_page(client: FlaskClient) -> None:
    assert client.get("/books?sort=colour").status_code == 400
    assert client.get("/books?page=0").status_code == 400
    assert client.get("/books?per_page=many").status_code == 400


def test_pages_past_the_end_are_empty(client: FlaskClient) -> None:
    body = client.get("/books?page=99&per_page=100").get_json()
    assert body["items"] == []
    assert body["total"] == 300


def test_create_then_show(client: FlaskClient) -> None:
    created = client.post("/books", json=NEW_BOOK)
    assert created.status_code == 201
    book = created.get_json()
    assert book["isbn"] == "9781402894626"
    assert book["status"] == "want"
    assert client.get(f"/books/{book['id']}").get_json() == book


def test_create_rejects_missing_and_invalid_fields(client: FlaskClient) -> None:
    missing = client.post("/books", json={"title": "No author"})
    assert missing.status_code == 400
    assert "isbn" in missing.get_json()["error"]
    bad_isbn = client.post("/books", json={**NEW_BOOK, "isbn": "12345"})
    assert bad_isbn.status_code == 400
    bad_rating = client.post("/books", json={**NEW_BOOK, "rating": 9})
    assert bad_rating.status_code == 400
    assert client.post("/books", data="not json").status_code == 400


def test_duplicate_isbn_conflicts(client: FlaskClient) -> None:
    assert client.post("/books", json=NEW_BOOK).status_code == 201
    assert client.post("/books", json=NEW_BOOK).status_code == 409


def test_patch_updates_only_given_fields(client: FlaskClient) -> None:
    before = client.get("/books/5").get_json()
    after = client.patch("/books/5", json={"status": "reading", "rating": 4}).get_json()
    assert after["status"] == "reading"
    assert after["rating"] == 4
    assert after["title"] == before["title"]


def test_put_requires_the_full_book(client: FlaskClient) -> None:
    assert client.put("/books/5", json={"status": "read"}).status_code == 400
    replaced = client.put("/books/5", json={**NEW_BOOK, "status": "read"})
    assert replaced.get_json()["title"] == NEW_BOOK["title"]


def test_delete_removes_the_book(client: FlaskClient) -> None:
    assert client.delete("/books/7").status_code == 204
    assert client.get("/books/7").status_code == 404
    assert client.delete("/books/7").status_code == 404


def test_unknown_book_is_404_json(client: FlaskClient) -> None:
    response = client.get("/books/999999")
    assert response.status_code == 404
    assert "999999" in response.get_json()["error"]
