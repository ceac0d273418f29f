"""Reading a request body under a cap: stop at the limit, never hold more than it in memory."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import Request
from starlette.requests import ClientDisconnect

from sreforge_trigger._errors import BodyTooLarge

__all__ = ["DRAIN_BYTES", "read_body"]

DRAIN_BYTES = 16 * 1024 * 1024
"""How much of a refused body is still read (and thrown away) so its sender sees the 413.

A server that answers before the body is in and closes the connection makes the sender's
TCP stack reset it, and the sender reads a connection error instead of the answer. Past
this (or `_DRAIN_S`), the connection is simply closed."""
_DRAIN_S = 5.0


async def read_body(request: Request, limit: int) -> bytes:
    """The body of `request`, or `BodyTooLarge` as soon as it is known to exceed `limit` bytes.

    A stated `Content-Length` over the limit is refused before keeping anything; a chunked
    body (or one that lies about its length) is read chunk by chunk and refused once past
    the limit. Either way the rest is drained, not kept (see `DRAIN_BYTES`).
    """
    stream = request.stream()
    stated = request.headers.get("content-length")
    if stated is not None and stated.strip().isdigit() and int(stated) > limit:
        if int(stated) <= DRAIN_BYTES:
            await _drain(stream, DRAIN_BYTES)
        raise BodyTooLarge(limit, f"Content-Length is {int(stated)} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            await _drain(stream, DRAIN_BYTES - size)
            raise BodyTooLarge(limit, f"the body ran past {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(stream: AsyncIterator[bytes], budget: int) -> None:
    """Read and drop what is left of the body, within `budget` bytes and `_DRAIN_S` seconds."""
    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(_DRAIN_S):
            async for chunk in stream:
                budget -= len(chunk)
                if budget <= 0:
                    return
