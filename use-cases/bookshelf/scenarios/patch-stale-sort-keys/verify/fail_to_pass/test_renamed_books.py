"""Hidden fail-to-pass tests: each fails on the base commit and passes once fixed.

The judge runs them in a process of their own: `service` is an HTTP client on the
submitted service, freshly seeded and started for each test.
"""

from __future__ import annotations

import httpx

NEW_BOOK = {"isbn": "978-0-261-10221-7", "title": "Teh Hobbit", "author": "J. R. R. Tolkein"}


def _created(service: httpx.Client) -> int:
    response = service.post("/books", json=NEW_BOOK)
    assert response.status_code == 201
    return int(response.json()["id"])


def _first(service: httpx.Client, sort: str) -> int:
    return int(service.get(f"/books?sort={sort}&per_page=1").json()["items"][0]["id"])


def test_patched_title_is_found_under_its_new_title(service: httpx.Client) -> None:
    book_id = _created(service)
    service.patch(f"/books/{book_id}", json={"title": "Zyzzyva Unbound"})
    hits = service.get("/search", params={"q": "zyzzyva"}).json()["results"]
    assert [hit["id"] for hit in hits] == [book_id]


def test_patched_title_is_no_longer_found_under_its_old_title(service: httpx.Client) -> None:
    book_id = _created(service)
    service.patch(f"/books/{book_id}", json={"title": "Zyzzyva Unbound"})
    hits = service.get("/search", params={"q": "teh hob"}).json()["results"]
    assert book_id not in [hit["id"] for hit in hits]


def test_patched_title_sorts_under_its_new_title(service: httpx.Client) -> None:
    book_id = _created(service)
    service.patch(f"/books/{book_id}", json={"title": "A A A First Of All"})
    assert _first(service, "title") == book_id


def test_patched_author_sorts_under_its_new_author(service: httpx.Client) -> None:
    book_id = _created(service)
    service.patch(f"/books/{book_id}", json={"author": "A A A Aardvark"})
    assert _first(service, "author") == book_id


def test_put_replaces_the_sort_keys(service: httpx.Client) -> None:
    book_id = _created(service)
    replaced = {**NEW_BOOK, "title": "A A A Replaced", "author": "A A A Replaced"}
    assert service.put(f"/books/{book_id}", json=replaced).status_code == 200
    assert _first(service, "title") == book_id
    assert _first(service, "author") == book_id
