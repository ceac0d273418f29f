"""Anthropic Messages (`POST /v1/messages`), plain or streamed, and its token counter.

A turn becomes one `message`: a `text` block (when there is text), then a `tool_use`
block per tool call; `stop_reason` is `tool_use` when there are calls, else `end_turn`.
Streamed (`"stream": true`) it is the API's event sequence: `message_start`, per block
`content_block_start` / `content_block_delta` (`text_delta`, or `input_json_delta`
for a tool's input) / `content_block_stop`, `message_delta` (stop reason, output
tokens) and `message_stop`. `POST /v1/messages/count_tokens` answers a fixed count
without taking a turn (the server asks the script only for flavored model calls).
"""

from __future__ import annotations

import json
from typing import Any

from ._script import Received, Turn
from ._server import Reply


class AnthropicMessages:
    """The Messages API: text and `tool_use` blocks, usage in input/output tokens."""

    def serves(self, request: Received) -> bool:
        """POST to a path ending in `/v1/messages` (not its token counter)."""
        return request.method == "POST" and request.flavor_path.rstrip("/").endswith("/v1/messages")

    def reply(self, turn: Turn, request: Received) -> Reply:
        """A `message`, or its event stream when the request says `"stream": true`."""
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or "replay-1")
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": dict(call.arguments),
                }
            )
        stop = "tool_use" if turn.tool_calls else "end_turn"
        usage = {"input_tokens": turn.tokens_in, "output_tokens": turn.tokens_out}
        head: dict[str, Any] = {
            "id": f"msg_replay_{id(turn):x}",
            "type": "message",
            "role": "assistant",
            "model": model,
        }
        if not body.get("stream"):
            return Reply.json(
                {
                    **head,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        start = {**head, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {"input_tokens": turn.tokens_in, "output_tokens": 1}
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for index, block in enumerate(blocks):
            events.extend(_block_events(index, block))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": turn.tokens_out},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return Reply.sse(events)


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str | None, Any]]:
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
    else:
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]
