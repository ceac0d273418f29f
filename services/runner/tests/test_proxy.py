"""The model proxy: the real key stays on the host, every call is logged with its tokens."""

from __future__ import annotations

import http.client
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
from sreforge_runner import (
    Budgets,
    CliAgentRein,
    HostSandbox,
    RunnerSettings,
    drive,
    load_profile,
)
from sreforge_runner._proxy import ModelProxy

KEY = "sk-upstream-real-key-42"
CATALOG = Path(__file__).resolve().parents[3] / "agents"
SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
    b'{"input_tokens":10,"output_tokens":1}}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":5}}\n\n'
)
CHAT = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
}


RESPONSES_SSE = (
    b'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
    b'{"input_tokens":20,"output_tokens":4,"total_tokens":24}}}\n\n'
)
GEMINI = {
    "candidates": [{"content": {"parts": [{"text": "ok"}]}}],
    "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 6, "totalTokenCount": 18},
}


@dataclass
class Upstream:
    """A loopback stand-in for the provider: records what reached it."""

    url: str = ""
    seen: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


DELTA = b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"x"}}\n\n'
_TAIL = SSE.index(b"event: message_delta")
LONG_SSE = SSE[:_TAIL] + DELTA * 2000 + SSE[_TAIL:]


def _answer(path: str) -> tuple[str, bytes]:
    if path.endswith("/long/messages"):
        return "text/event-stream", LONG_SSE
    if path.endswith("/messages"):
        return "text/event-stream", SSE
    if path.endswith("/responses"):
        return "text/event-stream", RESPONSES_SSE
    if ":generateContent" in path:
        return "application/json", json.dumps(GEMINI).encode()
    return "application/json", json.dumps(CHAT).encode()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """The one test double (hosted models are unreachable here): a loopback provider that
    answers Anthropic /messages and OpenAI /responses with SSE, Gemini :generateContent and
    OpenAI /chat/completions with JSON, all with usage, and records headers and paths."""
    state = Upstream()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.seen.append({k.lower(): v for k, v in self.headers.items()})
            state.paths.append(self.path)
            kind, data = _answer(self.path)
            self.send_response(200)
            self.send_header("Content-Type", kind)
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


def _post(url: str, headers: dict[str, str], document: Any = None) -> tuple[int, bytes]:
    body = json.dumps(document or {"model": "m-1", "messages": []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def test_the_proxy_swaps_the_session_token_for_the_real_key_and_logs_usage(
    upstream: Upstream, tmp_path: Path
) -> None:
    """OpenAI flavour: Bearer token in, real key out, JSON relayed, tokens logged (and the
    refused call with a wrong token logged as such)."""
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
        (401, "m-1", "/v1/chat/completions"),
        (200, "m-1", "/v1/chat/completions"),
    ]
    assert calls[0]["credential"] == ["authorization"]
    assert calls[1]["usage"] == CHAT["usage"]
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
    assert (call["tokens_in"], call["tokens_out"]) == (10, 5)


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


def test_usage_at_the_end_of_a_long_stream_is_counted(upstream: Upstream, tmp_path: Path) -> None:
    """The final counts of a stream come last, far past the logged head of the answer:
    they are read as the stream passes, so a long answer's tokens are not lost."""
    proxy = ModelProxy("anthropic", upstream.url, KEY, tmp_path / "calls.jsonl")
    base = proxy.start()
    try:
        status, body = _post(f"{base}/long/messages", {"x-api-key": proxy.token})
    finally:
        proxy.close()
    assert (status, body) == (200, LONG_SSE)
    call = json.loads((tmp_path / "calls.jsonl").read_text())
    assert call["response_bytes"] == len(LONG_SSE) > len(call["response"]) == 65_536
    assert (call["tokens_in"], call["tokens_out"]) == (10, 5)


def test_a_gemini_call_gets_the_key_header_and_never_forwards_or_logs_the_url_key(
    upstream: Upstream, tmp_path: Path
) -> None:
    """Gemini flavour: `?key=<token>` is accepted, stripped from the forwarded and logged
    path, and the real key travels as `x-goog-api-key`; the model comes from the path."""
    proxy = ModelProxy("gemini", upstream.url, KEY, tmp_path / "calls.jsonl")
    base = proxy.start()
    try:
        url = f"{base}/v1beta/models/gemini-2.5-flash:generateContent?key={proxy.token}&alt=json"
        status, body = _post(url, {}, {"contents": [{"parts": [{"text": "hi"}]}]})
    finally:
        proxy.close()
    assert (status, json.loads(body)) == (200, GEMINI)
    assert upstream.paths == ["/v1beta/models/gemini-2.5-flash:generateContent?alt=json"]
    assert upstream.seen[0]["x-goog-api-key"] == KEY
    log = (tmp_path / "calls.jsonl").read_text()
    assert proxy.token not in log
    call = json.loads(log)
    assert (call["model"], call["tokens_in"], call["tokens_out"]) == ("gemini-2.5-flash", 12, 6)


def test_websocket_upgrades_and_chunked_bodies(upstream: Upstream, tmp_path: Path) -> None:
    """A WebSocket upgrade is refused (501, logged, nothing forwarded) so a client falls
    back to HTTP; a chunked request body reaches the upstream whole."""
    proxy = ModelProxy("openai", f"{upstream.url}/v1", KEY, tmp_path / "calls.jsonl")
    base = proxy.start()
    port = int(base.split(":")[2].split("/")[0])
    auth = {"Authorization": f"Bearer {proxy.token}"}
    try:
        upgrade = {**auth, "Upgrade": "websocket", "Connection": "Upgrade"}
        assert _post(f"{base}/responses", upgrade)[0] == 501
        assert upstream.seen == []
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        chunks = iter([b'{"model": ', b'"gpt-4.1"}'])
        connection.request("POST", "/v1/chat/completions", chunks, auth, encode_chunked=True)
        answer = connection.getresponse()
        assert (answer.status, json.loads(answer.read())) == (200, CHAT)
        connection.close()
    finally:
        proxy.close()
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [(c["status"], c["model"]) for c in calls] == [(501, "m-1"), (200, "gpt-4.1")]


# preset → (url env, key env, auth header prefix, path under the base URL, the upstream's
# auth header, tokens in/out, list-price cost in USD)
PRESET_CALLS = {
    "claude-code": (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "x-api-key: ",
        "/v1/messages",
        ("x-api-key", KEY),
        (10, 5),
        0.000105,
    ),
    "codex": (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "Authorization: Bearer ",
        "/responses",
        ("authorization", f"Bearer {KEY}"),
        (20, 4),
        0.000065,
    ),
    "gemini-cli": (
        "GOOGLE_GEMINI_BASE_URL",
        "GEMINI_API_KEY",
        "x-goog-api-key: ",
        "/v1beta/models/{model}:generateContent",
        ("x-goog-api-key", KEY),
        (12, 6),
        0.000075,
    ),
    "aider": (
        "OPENAI_API_BASE",
        "OPENAI_API_KEY",
        "Authorization: Bearer ",
        "/chat/completions",
        ("authorization", f"Bearer {KEY}"),
        (7, 3),
        0.000038,
    ),
    "mini-swe-agent": (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "Authorization: Bearer ",
        "/chat/completions",
        ("authorization", f"Bearer {KEY}"),
        (7, 3),
        0.000038,
    ),
}


def _preset_profile(preset: str, upstream: Upstream, bypass: bool = False) -> HarnessProfile:
    """The catalog's preset with its binary swapped for a fake CLI agent (a shell script
    calling the base URL from its env with the key from its env, as the real CLI would);
    with `bypass` it first tries the provider directly, around the proxy."""
    url_env, key_env, header, path, *_ = PRESET_CALLS[preset]
    direct = f"curl -sS -m 5 -d '{{}}' {upstream.url}/direct || echo direct-unreachable; "
    script = ("" if not bypass else direct) + (
        f'echo "key=${key_env}"; cat "$HOME/.codex/config.toml" 2>/dev/null; '
        f'curl -sS -H "{header}${key_env}" -H "Content-Type: application/json" '
        f'-d \'{{"model": "{{model}}"}}\' "${url_env}{path}"; echo; submit'
    )
    profile = load_profile(CATALOG / f"{preset}.toml")
    assert profile.command is not None
    command = profile.command.model_copy(update={"executable": "/bin/sh", "args": ("-c", script)})
    upstream_url = f"{upstream.url}/v1" if "OPENAI" in url_env else upstream.url
    return profile.model_copy(update={"command": command, "metadata": {"upstream": upstream_url}})


def _drive(project: Any, settings: RunnerSettings, profile: HarnessProfile, kind: str) -> Any:
    context = ResolvedExecutionContext(
        request_id="run-preset",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind=kind,  # type: ignore[arg-type]
    )
    rein = CliAgentRein(profile, "# page\n", run_id="run-preset")
    return box, drive(context, rein, box, Budgets(60, 30, 30))


@pytest.mark.parametrize(
    ("preset", "kind"),
    [
        *((preset, "host-open") for preset in PRESET_CALLS),
        pytest.param(
            "claude-code",
            "host-sandboxed",
            marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap"),
        ),
    ],
)
async def test_every_preset_reaches_its_model_through_the_proxy_by_default(
    project: Any,
    settings: RunnerSettings,
    upstream: Upstream,
    monkeypatch: pytest.MonkeyPatch,
    preset: str,
    kind: str,
) -> None:
    """With no proxy metadata, a catalog preset's agent gets the proxy URL and a dummy
    token in the env names its CLI reads (in bubblewrap the proxy is reachable, the
    provider itself is not); the provider gets the real key; the call is logged with
    tokens and list-price cost into the log, transcript and evidence; the key is in no
    file and not in the evidence."""
    url_env, _, _, _, auth, tokens, cost = PRESET_CALLS[preset]
    confined = kind == "host-sandboxed"
    profile = _preset_profile(preset, upstream, bypass=confined)
    monkeypatch.setenv(profile.credential_routes[0], KEY)
    box, running = _drive(project, settings, profile, kind)
    run = await running
    out = box.log_path.read_text()
    assert run.ok, (run.result.evidence, out)
    assert ("direct-unreachable" in out) == confined  # in bubblewrap, only the proxy
    assert "key=[REDACTED:MODEL_PROXY_TOKEN]" in out  # the dummy token (kept redacted)
    assert "key=sk-proxy-" not in out
    route = profile.credential_routes[0]
    assert f"[REDACTED:{route}]" not in out  # nothing to scrub: the agent never saw the key
    assert [seen[auth[0]] for seen in upstream.seen] == [auth[1]]
    if preset == "codex":
        assert 'openai_base_url = "http://127.0.0.1:' in out
    calls = [json.loads(line) for line in (box.root / "model-calls.jsonl").read_text().splitlines()]
    assert [(c["status"], c["tokens_in"], c["tokens_out"]) for c in calls] == [(200, *tokens)]
    transcript = json.loads((box.root / "agent-transcript.json").read_text())
    summary = transcript["raw_json"]["model_calls"]
    assert (summary["calls"], summary["tokens_in"], summary["tokens_out"]) == (1, *tokens)
    assert summary["cost_usd"] == cost
    assert summary["rows"][0]["cost_usd"] == cost
    assert transcript["provider"] == {"ANTHROPIC": "anthropic", "GOOGLE": "gemini"}.get(
        url_env.split("_")[0], "openai"
    )
    evidence = run.result.evidence.metadata["model_usage"]
    assert (evidence["tokens_in"], evidence["cost_usd"]) == (tokens[0], cost)
    assert KEY not in run.result.model_dump_json()
    for kept in box.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept


async def test_a_missing_model_key_fails_session_start_naming_the_variable(
    project: Any,
    settings: RunnerSettings,
    upstream: Upstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy needs the real key: without the route's env var the session fails at
    session_start, the error names the variable, and no agent or model call ran."""
    profile = _preset_profile("claude-code", upstream)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    box, running = _drive(project, settings, profile, "host-open")
    run = await running
    assert not run.ok
    assert run.dispatch is None
    assert run.primary is not None
    assert run.primary.stage == "session_start"
    assert "$ANTHROPIC_API_KEY" in run.primary.error
    assert upstream.seen == []
    assert not box.log_path.exists()
