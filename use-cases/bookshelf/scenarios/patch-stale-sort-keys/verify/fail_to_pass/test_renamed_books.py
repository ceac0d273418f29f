"""Hidden fail-to-pass tests: each fails on the base commit and passes once fixed."""

from __future__ import annotations

from flask.testing import FlaskClient

NEW_BOOK = {"isbn": "978-0-261-10221-7", "title": "Teh Hobbit", "author": "J. R. R. Tolkein"}


def _created(client: FlaskClient) -> int:
    response = client.post("/books", json=NEW_BOOK)
    assert response.status_code == 201
    return int(response.get_json()["id"])


def _titles(client: FlaskClient, **query: str) -> list[str]:
    args = "&".join(f"{name}={value}" for name, value in query.items())
    return [book["title"] for book in client.get(f"/books?per_page=100&{args}").get_json()["items"]]


def test_patched_title_is_found_under_its_new_title(client: FlaskClient) -> None:
    book_id = _created(client)
    client.patch(f"/books/{book_id}", json={"title": "Zyzzyva Unbound"})
    hits = client.get("/search?q=zyzzyva").get_json()["results"]
    assert [hit["id"] for hit in hits] == [book_id]


def test_patched_title_is_no_longer_found_under_its_old_title(client: FlaskClient) -> None:
    book_id = _created(client)
    client.patch(f"/books/{book_id}", json={"title": "Zyzzyva Unbound"})
    hits = client.get("/search?q=teh hob").get_json()["results"]
    assert book_id not in [hit["id"] for hit in hits]


def test_patched_title_sorts_under_its_new_title(client: FlaskClient) -> None:
    book_id = _created(client)
    client.patch(f"/books/{book_id}", json={"title": "A A A First Of All"})
    first = client.get("/books?sort=title&per_page=1").get_json()["items"][0]
    assert first["id"] == book_id


def test_patched_author_sorts_under_its_new_author(client: FlaskClient) -> None:
    book_id = _created(client)
    client.patch(f"/books/{book_id}", json={"author": "A A A Aardvark"})
    first = client.get("/books?sort=author&per_page=1").get_json()["items"][0]
    assert first["id"] == book_id


def test_put_replaces_the_sort_keys(client: FlaskClient) -> None:
    book_id = _created(client)
    replaced = {**NEW_BOOK, "title": "A A A Replaced", "author": "A A A Replaced"}
    assert client.put(f"/books/{book_id}", json=replaced).status_code == 200
    assert client.get("/books?sort=title&per_page=1").get_json()["items"][0]["id"] == book_id
    assert client.get("/books?sort=author&per_page=1").get_json()["items"][0]["id"] == book_id
