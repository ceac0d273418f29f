"""The stated size limits of bus messages, checked before any JSON is parsed (SPEC §3).

One place for them: the bus refuses to consume or publish past them, the contracts'
parsers reject an input past them with a `ContractError` naming the limit, and the
correlator answers an oversize `run.start` with a RunRejected that says so.
"""

from __future__ import annotations

import re
from itertools import accumulate

from sreforge_contracts._errors import ContractError

__all__ = ["MAX_JSON_DEPTH", "MAX_MESSAGE_BYTES", "check_message"]

MAX_MESSAGE_BYTES = 512 * 1024
"""The largest command or event body (bytes): half of NATS's default 1 MiB max payload.

The largest legitimate message is Scored with its whole grading series (about 230 bytes a
sample, ~1000 samples for a 600 s + 360 s window at 1 Hz, about 220 KB); 512 KiB leaves it
room, and the other half of the max payload leaves room for headers."""

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def check_message(data: bytes | str, source: str) -> None:
    """Raise `ContractError` (naming `source` and the limit) if `data` is too big or too deep.

    The depth is measured without parsing (so without recursion): strings are cut out and
    the brackets left are counted. Malformed JSON is left for the parser to describe.
    """
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_MESSAGE_BYTES:
        raise ContractError(
            f"{source}: message is {len(raw)} bytes, over the limit of "
            f"{MAX_MESSAGE_BYTES} bytes (MAX_MESSAGE_BYTES)",
            source=source,
        )
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_A_BRACKET)
    deepest = max(accumulate(_STEP[b] for b in brackets), default=0)
    if deepest > MAX_JSON_DEPTH:
        raise ContractError(
            f"{source}: JSON nests {deepest} levels deep, over the limit of "
            f"{MAX_JSON_DEPTH} (MAX_JSON_DEPTH)",
            source=source,
        )
