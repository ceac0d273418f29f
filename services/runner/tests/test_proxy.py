"""The model proxy: the real key stays on the host, every call is logged with its tokens."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import (
    CommandSpec,
    HarnessProfile,
    OperationalReadiness,
    ProfileLimits,
    ResolvedExecutionContext,
)
from sreforge_runner import Budgets, CliAgentRein, HostSandbox, RunnerSettings, drive
from sreforge_runner._proxy import ModelProxy

KEY = "sk-upstream-real-key-42"
SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
    b'{"input_tokens":10,"output_tokens":1}}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":5}}\n\n'
)
CHAT = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
}


@dataclass
class Upstream:
    """A loopback stand-in for the provider: records what reached it."""

    url: str = ""
    seen: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """Answers /v1/chat/completions with JSON and /v1/messages with an SSE stream."""
    state = Upstream()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.seen.append({k.lower(): v for k, v in self.headers.items()})
            sse = self.path.endswith("/messages")
            data = SSE if sse else json.dumps(CHAT).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _post(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    body = json.dumps({"model": "m-1", "messages": []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def test_the_proxy_swaps_the_session_token_for_the_real_key_and_logs_usage(
    upstream: Upstream, tmp_path: Path
) -> None:
    """OpenAI flavour: Bearer token in, real key out, JSON relayed, tokens logged."""
    proxy = ModelProxy("openai", f"{upstream.url}/v1", KEY, tmp_path / "calls.jsonl")
    base = proxy.start()
    try:
        assert _post(f"{base}/chat/completions", {"Authorization": "Bearer wrong"})[0] == 401
        status, body = _post(f"{base}/chat/completions", {"Authorization": f"Bearer {proxy.token}"})
    finally:
        proxy.close()
    assert (status, json.loads(body)) == (200, CHAT)
    assert [seen["authorization"] for seen in upstream.seen] == [f"Bearer {KEY}"]
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [(c["status"], c["model"], c["path"]) for c in calls] == [
        (200, "m-1", "/v1/chat/completions")
    ]
    assert calls[0]["usage"] == CHAT["usage"]
    assert KEY not in (tmp_path / "calls.jsonl").read_text()


def test_an_anthropic_stream_is_relayed_as_is_with_its_usage(
    upstream: Upstream, tmp_path: Path
) -> None:
    """Anthropic flavour: x-api-key swapped, SSE bytes unchanged, usage merged."""
    proxy = ModelProxy("anthropic", upstream.url, KEY, tmp_path / "calls.jsonl")
    base = proxy.start()
    try:
        status, body = _post(f"{base}/v1/messages", {"x-api-key": proxy.token})
    finally:
        proxy.close()
    assert (status, body) == (200, SSE)
    assert upstream.seen[0]["x-api-key"] == KEY
    assert "authorization" not in upstream.seen[0]
    call = json.loads((tmp_path / "calls.jsonl").read_text())
    assert call["usage"] == {"input_tokens": 10, "output_tokens": 5}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_a_sandboxed_cli_agent_reaches_its_model_only_through_the_proxy(
    project: Any,
    settings: RunnerSettings,
    upstream: Upstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent's env holds the proxy URL and a session token, never the real key; its
    call reaches the provider with the key; the transcript counts the call."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = (
        'env | grep -E "^OPENAI_" ; '
        'curl -sS -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" '
        '-d \'{"model": "m-1"}\' "$OPENAI_BASE_URL/chat/completions"; echo; submit'
    )
    profile = HarnessProfile(
        name="proxied",
        rein="command",
        sandbox="host-sandboxed",
        credential_routes=("OPENAI_API_KEY",),
        limits=ProfileLimits(session_start_s=30, idle_s=30, total_s=60),
        command=CommandSpec(preset="custom", executable="/bin/sh", args=("-c", script)),
        metadata={"proxy": "openai", "upstream": f"{upstream.url}/v1"},
    )
    context = ResolvedExecutionContext(
        request_id="run-proxy",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    run = await drive(
        context, CliAgentRein(profile, "# page\n", run_id="run-proxy"), box, Budgets(60, 30, 30)
    )
    out = box.log_path.read_text()
    assert run.ok, (run.result.evidence, out)
    assert '"total_tokens": 10' in out  # the provider's answer reached the agent
    assert "OPENAI_BASE_URL=http://127.0.0.1:" in out
    assert KEY not in out
    assert upstream.seen[0]["authorization"] == f"Bearer {KEY}"
    transcript = json.loads((box.root / "agent-transcript.json").read_text())
    assert transcript["raw_json"]["completeness"]["proxy_calls"] == 1
    assert transcript["raw_json"]["model_calls"]["total_tokens"] == 10
    for kept in box.root.glob("*.*"):
        assert KEY not in kept.read_text(errors="replace"), kept
