"""Gemini API (`…/models/<model>:generateContent`, `:streamGenerateContent`, `:countTokens`).

A turn is one candidate: its text as a `text` part, each tool call as a
`functionCall {name, args}` part (with the call's id, as the CLI matches results by
it). `:streamGenerateContent?alt=sse` writes the whole turn as one SSE chunk (the
CLI merges chunks; one is enough; without `alt=sse`, a JSON array of it),
`:generateContent` as one JSON document.
`:countTokens` gets a rough count (it still reaches the script first: a
conversation's `aside` answers it, so it takes no turn; gemini-cli 0.61 never sent one).
"""

from __future__ import annotations

import json
from typing import Any

from ._script import Received, Turn
from ._server import Reply

_METHODS = (":generateContent", ":streamGenerateContent", ":countTokens")


class GeminiGenerate:
    """The Gemini API's generate methods: one candidate, tool calls as `functionCall`."""

    def serves(self, request: Received) -> bool:
        """POST to `…/models/<model>:<method>` for the generate and count methods."""
        path = request.flavor_path
        return request.method == "POST" and "/models/" in path and path.endswith(_METHODS)

    def reply(self, turn: Turn, request: Received) -> Reply:
        """A `GenerateContentResponse` (SSE when streamed), or a `countTokens` answer."""
        path = request.flavor_path
        if path.endswith(":countTokens"):
            return Reply.json({"totalTokens": _rough_tokens(request.body)})
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"text": turn.text})
        for call in turn.tool_calls:
            parts.append(
                {"functionCall": {"id": call.id, "name": call.name, "args": dict(call.arguments)}}
            )
        model = path.rsplit("/models/", 1)[1].split(":", 1)[0]
        document = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts or [{"text": ""}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": turn.tokens_in,
                "candidatesTokenCount": turn.tokens_out,
                "totalTokenCount": turn.tokens_in + turn.tokens_out,
            },
            "modelVersion": model,
            "responseId": f"replay-{id(turn):x}",
        }
        if not path.endswith(":streamGenerateContent"):
            return Reply.json(document)
        if "alt=sse" in request.path:
            return Reply.sse([(None, document)])
        return Reply.json([document])


def _rough_tokens(body: Any) -> int:
    """About four characters a token, as a count only has to be plausible."""
    return max(1, len(json.dumps(body)) // 4)
