"""The replay server's OpenAI Responses flavor (the test double codex talks to), read the
way the model proxy reads an answer."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import replay
from sreforge_runner._proxy import usage_of

TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
]
TURN = replay.Turn(
    text="Looking.",
    tool_calls=[
        replay.ToolCall("exec_command", {"cmd": "git status"}, id="call_a"),
        replay.ToolCall("apply_patch", {"input": "*** Begin Patch\n*** End Patch\n"}, id="call_b"),
    ],
    tokens_in=70,
    tokens_out=9,
)


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(
        f"{url}/v1/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["Content-Type"], answer.read()


def test_a_streamed_turn_is_the_responses_event_sequence_with_usage_last() -> None:
    """Text, a function call and a freeform (custom) call, each announced, streamed and
    done, then `response.completed` with the usage the proxy counts as tokens."""
    with replay.ReplayServer(replay.Script([TURN])) as server:
        kind, raw = _post(server.url, {"model": "m", "stream": True, "tools": TOOLS})
    assert kind == "text/event-stream"
    events = [
        json.loads(line[5:]) for line in raw.decode().splitlines() if line.startswith("data:")
    ]
    names = [event["type"] for event in events]
    assert names[0] == "response.created"
    assert names[-1] == "response.completed"
    assert names.count("response.output_item.added") == names.count("response.output_item.done")
    assert "response.output_text.delta" in names
    assert "response.function_call_arguments.done" in names
    assert "response.custom_tool_call_input.done" in names
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["message", "function_call", "custom_tool_call"]
    assert json.loads(done[1]["arguments"]) == {"cmd": "git status"}
    assert (done[1]["call_id"], done[2]["call_id"]) == ("call_a", "call_b")
    assert done[2]["input"].startswith("*** Begin Patch")
    usage = usage_of(raw)
    assert usage is not None
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (70, 9, 79)


def test_a_plain_turn_is_one_response_object() -> None:
    """Without `stream` the answer is the `response` JSON with the same output and usage."""
    with replay.ReplayServer(replay.Script([TURN])) as server:
        kind, raw = _post(server.url, {"model": "m", "tools": TOOLS})
    assert kind == "application/json"
    response = json.loads(raw)
    assert (response["object"], response["status"], response["model"]) == (
        "response",
        "completed",
        "m",
    )
    assert [item["type"] for item in response["output"]] == [
        "message",
        "function_call",
        "custom_tool_call",
    ]
    assert usage_of(raw) == {"input_tokens": 70, "output_tokens": 9, "total_tokens": 79}
