"""OpenAI Responses (`POST …/responses`), plain JSON or streamed (SSE).

A turn becomes the response's `output`: a `message` item with the text, then one item
per tool call. A call to a tool the request declares as `function` is a
`function_call` (arguments as a JSON string); one declared `custom` (a freeform tool,
such as codex's `apply_patch`) is a `custom_tool_call` whose `input` is the call's
`input` argument. The stream is the event sequence the API sends: `response.created`,
per item `response.output_item.added`, its deltas and `…done` events and
`response.output_item.done`, then `response.completed` carrying the whole response and
its usage (`input_tokens`, `output_tokens`, `total_tokens`).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from ._script import Received, ToolCall, Turn
from ._server import Reply

_ids = itertools.count(1)


class OpenAIResponses:
    """The Responses API: output items (message, function and custom tool calls)."""

    def serves(self, request: Received) -> bool:
        """POST to a path ending in `/responses`."""
        return request.method == "POST" and request.flavor_path.rstrip("/").endswith("/responses")

    def reply(self, turn: Turn, request: Received) -> Reply:
        """A `response` object, or its event stream when the request says `stream`."""
        body = request.body if isinstance(request.body, dict) else {}
        items = _items(turn, _custom_tools(body))
        response = _response(turn, body, items)
        if not body.get("stream"):
            return Reply.json(response)
        return Reply.sse(_events(response, items))


def _custom_tools(body: dict[str, Any]) -> set[str]:
    tools = body.get("tools") or []
    return {
        str(tool.get("name"))
        for tool in tools
        if isinstance(tool, dict) and tool.get("type") == "custom"
    }


def _items(turn: Turn, custom: set[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        text = {"type": "output_text", "text": turn.text, "annotations": []}
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids):04d}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    items.extend(_call(call, call.name in custom) for call in turn.tool_calls)
    return items


def _call(call: ToolCall, custom: bool) -> dict[str, Any]:
    head = {"id": f"fc_{next(_ids):04d}", "status": "completed", "call_id": call.id}
    if custom:
        input_text = call.arguments.get("input", "")
        return {**head, "type": "custom_tool_call", "name": call.name, "input": str(input_text)}
    arguments = json.dumps(dict(call.arguments))
    return {**head, "type": "function_call", "name": call.name, "arguments": arguments}


def _response(turn: Turn, body: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    usage = {
        "input_tokens": turn.tokens_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.tokens_in + turn.tokens_out,
    }
    return {
        "id": f"resp_{id(turn):x}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": str(body.get("model") or "replay-1"),
        "output": items,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", False)),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "usage": usage,
    }


def _events(response: dict[str, Any], items: list[dict[str, Any]]) -> list[tuple[str | None, Any]]:
    sequence = itertools.count()
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(sequence), **data}))

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(items):
        emit("response.output_item.added", output_index=index, item=_opened(item))
        for kind, data in _deltas(item):
            emit(kind, output_index=index, item_id=item["id"], **data)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """The item as `output_item.added` announces it: in progress, before its content."""
    blank = {"message": ("content", []), "function_call": ("arguments", "")}
    field, empty = blank.get(item["type"], ("input", ""))
    return {**item, "status": "in_progress", field: empty}


def _deltas(item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"content_index": 0}
        return [
            ("response.content_part.added", {**part, "part": {**item["content"][0], "text": ""}}),
            ("response.output_text.delta", {**part, "delta": text}),
            ("response.output_text.done", {**part, "text": text}),
            ("response.content_part.done", {**part, "part": item["content"][0]}),
        ]
    if item["type"] == "function_call":
        arguments = item["arguments"]
        return [
            ("response.function_call_arguments.delta", {"delta": arguments}),
            ("response.function_call_arguments.done", {"arguments": arguments}),
        ]
    return [
        ("response.custom_tool_call_input.delta", {"delta": item["input"]}),
        ("response.custom_tool_call_input.done", {"input": item["input"]}),
    ]
