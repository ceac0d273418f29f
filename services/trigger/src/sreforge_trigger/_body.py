"""Reading a request body under a cap: stop at the limit, never hold more than it in memory."""

from __future__ import annotations

from fastapi import Request

from sreforge_trigger._errors import BodyTooLarge

__all__ = ["read_body"]


async def read_body(request: Request, limit: int) -> bytes:
    """The body of `request`, or `BodyTooLarge` as soon as it is known to exceed `limit` bytes.

    A stated `Content-Length` over the limit is refused before reading anything; a chunked
    body (or one that lies about its length) is read chunk by chunk and dropped once past it.
    """
    stated = request.headers.get("content-length")
    if stated is not None and stated.strip().isdigit() and int(stated) > limit:
        raise BodyTooLarge(limit, f"Content-Length is {int(stated)} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, f"the body ran past {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
