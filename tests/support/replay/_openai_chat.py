"""OpenAI Chat Completions (`POST …/chat/completions`), plain or streamed."""

from __future__ import annotations

import json
import time
from typing import Any

from ._script import Received, Turn
from ._server import Reply


class OpenAIChat:
    """The Chat Completions API: one choice, tool calls as functions."""

    def serves(self, request: Received) -> bool:
        """POST to a path ending in `/chat/completions`."""
        return request.method == "POST" and request.flavor_path.endswith("/chat/completions")

    def reply(self, turn: Turn, request: Received) -> Reply:
        """A `chat.completion`, or its `chat.completion.chunk` stream ending in `[DONE]`."""
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or "replay-1")
        usage = {
            "prompt_tokens": turn.tokens_in,
            "completion_tokens": turn.tokens_out,
            "total_tokens": turn.tokens_in + turn.tokens_out,
        }
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for call in turn.tool_calls
        ]
        finish = "tool_calls" if calls else "stop"
        head: dict[str, Any] = {"id": f"chatcmpl-{id(turn)}", "created": int(time.time())}
        head["model"] = model
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return Reply.json(
                {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
        chunk = {**head, "object": "chat.completion.chunk"}

        def delta(d: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
            return {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": reason}]}

        events: list[tuple[str | None, Any]] = [(None, delta({"role": "assistant"}))]
        if turn.text:
            events.append((None, delta({"content": turn.text})))
        for index, call in enumerate(calls):
            events.append((None, delta({"tool_calls": [{"index": index, **call}]})))
        events.append((None, delta({}, finish)))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return Reply.sse(events)
