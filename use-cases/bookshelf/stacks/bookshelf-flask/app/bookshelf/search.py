"""Title search, with each hit enriched by the metadata service."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from .db import find_by_title_prefix, get_db
from .metadata import get_metadata
from .validation import InvalidInput, bounded_int

bp = Blueprint("search", __name__)


@bp.get("/search")
def search() -> dict[str, Any]:
    query = request.args.get("q", "").strip()
    if not query:
        raise InvalidInput("q must not be empty")
    limit = bounded_int(request.args.get("limit"), "limit", 5, 1, 20)
    books = find_by_title_prefix(get_db(), query, limit)
    metadata = get_metadata()
    results = [{**book, "metadata": metadata.lookup(book["isbn"])} for book in books]
    return {"query": query, "count": len(results), "results": results}
