"""Books CRUD and the paginated library listing."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, request

from .db import SORTS, get_book, get_db, list_books
from .validation import InvalidInput, book_fields, bounded_int

bp = Blueprint("books", __name__)


@bp.get("/books")
def index() -> dict[str, Any]:
    sort = request.args.get("sort", "title")
    if sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}")
    order = request.args.get("order", "asc")
    if order not in ("asc", "desc"):
        raise InvalidInput("order must be asc or desc")
    page = bounded_int(request.args.get("page"), "page", 1, 1, 100_000)
    per_page = bounded_int(request.args.get("per_page"), "per_page", 25, 1, 100)
    items, total = list_books(get_db(), sort, order == "desc", per_page, (page - 1) * per_page)
    return {"items": items, "page": page, "per_page": per_page, "total": total}


@bp.get("/books/<int:book_id>")
def show(book_id: int) -> dict[str, Any]:
    return _existing(book_id)


@bp.post("/books")
def create() -> tuple[dict[str, Any], int]:
    fields = book_fields(request.get_json(silent=True), partial=False)
    fields.setdefault("status", "want")
    fields["added_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conn = get_db()
    names = ", ".join(fields)
    marks = ", ".join("?" for _ in fields)
    try:
        cursor = conn.execute(
            f"INSERT INTO books ({names}) VALUES ({marks})", tuple(fields.values())
        )
        conn.commit()
    except sqlite3.IntegrityError:
        abort(409, description=f"a book with ISBN {fields['isbn']} is already on the shelf")
    assert cursor.lastrowid is not None
    return _existing(cursor.lastrowid), 201


@bp.route("/books/<int:book_id>", methods=["PATCH", "PUT"])
def update(book_id: int) -> dict[str, Any]:
    _existing(book_id)
    fields = book_fields(request.get_json(silent=True), partial=request.method == "PATCH")
    if fields:
        assignments = ", ".join(f"{name} = ?" for name in fields)
        conn = get_db()
        try:
            conn.execute(
                f"UPDATE books SET {assignments} WHERE id = ?", (*fields.values(), book_id)
            )
            conn.commit()
        except sqlite3.IntegrityError:
            abort(409, description=f"a book with ISBN {fields['isbn']} is already on the shelf")
    return _existing(book_id)


@bp.delete("/books/<int:book_id>")
def delete(book_id: int) -> tuple[str, int]:
    _existing(book_id)
    conn = get_db()
    conn.execute("DELETE FROM books WHERE id = ?", (book_id,))
    conn.commit()
    return "", 204


def _existing(book_id: int) -> dict[str, Any]:
    book = get_book(get_db(), book_id)
    if book is None:
        abort(404, description=f"no book with id {book_id}")
    return book
