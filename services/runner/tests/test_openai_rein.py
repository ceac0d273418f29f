"""The `openai` rein against a local OpenAI-compatible server replaying a scripted conversation.

The server is the one named test double (hosted models are unreachable here): it
answers /v1/chat/completions with a fixed list of tool-calling replies and records
every request it got.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import (
    HarnessProfile,
    OperationalReadiness,
    ProfileLimits,
    ResolvedExecutionContext,
)
from sreforge_runner import (
    Budgets,
    HostSandbox,
    OpenAIRein,
    RunnerSettings,
    check_profile,
    drive,
    head_commit,
    read_sentinel,
    workspace_diff,
)

KEY = "sk-real-test-key-0123456789"


def _call(call_id: str, name: str, **arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _reply(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return {
        "id": "chatcmpl-test",
        "model": "replay-1",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


SCRIPT = [
    _reply(
        _call("c1", "read_file", path="../outside.txt"),
        _call("c2", "shell", command="echo key=${OPENAI_API_KEY:-absent}; ls /work || true"),
        content="Looking around.",
    ),
    _reply(_call("c3", "write_file", path="cache_settings.py", content="TTL = 60\n")),
    _reply(_call("c4", "submit", rca="The cache TTL was 1 s; raised to 60 s.")),
]


@dataclass
class Replay:
    """What the replay server saw."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A loopback OpenAI-compatible server answering with SCRIPT, in order."""
    with _serve(SCRIPT) as state:
        yield state


@contextlib.contextmanager
def _serve(script: list[dict[str, Any]]) -> Iterator[Replay]:
    """The replay server answering with `script`, in order, then `done`."""
    answers = iter(script)
    state = Replay(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            """Quiet."""

        def _send(self, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "replay-1"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            state.requests.append(json.loads(self.rfile.read(length)))
            state.auth.append(self.headers.get("Authorization", ""))
            self._send(next(answers, _reply(content="done")))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _profile(url: str, sandbox: str) -> HarnessProfile:
    return HarnessProfile(
        name="openai",
        rein="openai",
        sandbox=sandbox,  # type: ignore[arg-type]
        model="replay-1",
        credential_routes=("OPENAI_API_KEY",),
        limits=ProfileLimits(session_start_s=30, idle_s=30, total_s=60),
        metadata={"base_url": url},
    )


@pytest.mark.parametrize(
    "sandbox",
    [
        "host-open",
        pytest.param(
            "host-sandboxed",
            marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap"),
        ),
    ],
)
async def test_the_openai_rein_fixes_and_submits_with_every_call_logged(
    project: Any,
    settings: RunnerSettings,
    replay: Replay,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: str,
) -> None:
    """Tools act on the workspace, `submit --rca` lands, every model call is logged with
    tokens, the key goes only to the endpoint (never into the sandbox or the evidence),
    and file tools cannot leave the repository."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (project.workspace.parent / "outside.txt").write_text("harness-only\n")
    profile = _profile(replay.url, sandbox)
    context = ResolvedExecutionContext(
        request_id="run-openai",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind=profile.sandbox
    )
    base = head_commit(project.workspace)
    rein = OpenAIRein(profile, "# Checkout is slow\n", run_id="run-openai")
    run = await drive(context, rein, box, Budgets(60, 30, 30))
    assert run.ok, run.result.evidence
    assert run.dispatch is not None
    assert run.dispatch.stop_reason == "submitted"
    assert run.result.evidence.confinement == sandbox
    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None
    assert sentinel.rca is not None
    assert "TTL" in sentinel.rca
    assert "+TTL = 60" in workspace_diff(project.workspace, base).splitlines()

    assert len(replay.requests) == 3
    assert replay.auth == [f"Bearer {KEY}"] * 3
    assert replay.requests[0]["messages"][1]["content"].startswith("# Checkout is slow")
    tool_replies = [m["content"] for m in replay.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_replies[0].startswith("error: no such file")
    assert "key=absent" in tool_replies[1]
    if sandbox == "host-sandboxed":
        assert "No such file or directory" in tool_replies[1]  # /work is invisible

    calls = [json.loads(line) for line in (box.root / "model-calls.jsonl").read_text().splitlines()]
    assert [call["usage"]["total_tokens"] for call in calls] == [120, 120, 120]
    assert [call["tool_calls"] for call in calls] == [
        ["read_file", "shell"],
        ["write_file"],
        ["submit"],
    ]
    transcript = json.loads((box.root / "agent-transcript.json").read_text())
    assert transcript["confinement"] == sandbox
    model_calls = transcript["raw_json"]["model_calls"]
    summary = ("calls", "total_tokens", "tokens_in", "cost_usd")
    assert {key: model_calls[key] for key in summary} == {
        "calls": 3,
        "total_tokens": 360,
        "tokens_in": 300,
        "cost_usd": None,  # replay-1 has no list price
    }
    for kept in box.root.glob("*.*"):
        assert KEY not in kept.read_text(errors="replace"), kept
    assert KEY not in run.result.model_dump_json()


async def test_a_silent_endpoint_fires_the_session_start_budget(
    project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """No model answer within session_start_s: the rein stops and says which budget fired."""
    profile = _profile("http://127.0.0.1:9/v1", "host-open")
    hanging = _Hanging()
    profile = profile.model_copy(update={"metadata": {"base_url": hanging.url}})
    context = ResolvedExecutionContext(
        request_id="run-silent",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(project.workspace, tmp_path / "agent", settings)
    try:
        run = await drive(context, OpenAIRein(profile, "# page\n"), box, Budgets(30, 10, 0.5))
    finally:
        hanging.close()
    assert run.result.evidence.timeout == "session_start"
    assert run.result.evidence.failure_stage == "session_start"


class _Hanging:
    """A socket that accepts connections and never answers."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def close(self) -> None:
        self.sock.close()


def test_check_probes_the_endpoint(replay: Replay, tmp_path: Path) -> None:
    """`agents check` on an openai profile: GET /models answers → ready, stored."""
    settings = RunnerSettings(readiness_dir=tmp_path / "readiness")
    record = check_profile(_profile(replay.url, "host-open"), settings)
    assert record.readiness.state == "ready", record
    assert record.checks[0].exit_code == 200
    dead = check_profile(_profile("http://127.0.0.1:9/v1", "host-open"), settings)
    assert dead.readiness.state == "blocked"
    assert dead.readiness.owner == "operator"


SHELL_SUBMIT = [
    _reply(_call("s1", "shell", command="echo 'TTL = 60' > cache_settings.py && submit")),
    _reply(content="Submitted from the shell; stopping."),
]


async def test_submit_from_the_shell_tool_counts_as_submitted(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`submit` run through the shell tool leaves the sentinel: the transcript header says
    `submitted: true` and the session stops as submitted (the sentinel is the truth)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with _serve(SHELL_SUBMIT) as server:
        profile = _profile(server.url, "host-open")
        context = ResolvedExecutionContext(
            request_id="run-openai",
            profile=profile,
            readiness=OperationalReadiness(state="unverified"),
            proof_run=True,
        )
        box = HostSandbox(
            project.workspace, project.workspace.parent / "agent", settings, kind="host-open"
        )
        rein = OpenAIRein(profile, "# Checkout is slow\n", run_id="run-openai")
        run = await drive(context, rein, box, Budgets(60, 30, 30))
        assert run.ok, run.result.evidence
        assert len(server.requests) == 1, "it stops once the sentinel is there"
    assert read_sentinel(project.workspace) is not None
    assert run.dispatch is not None
    assert run.dispatch.stop_reason == "submitted"
    transcript = json.loads((box.root / "agent-transcript.json").read_text())
    assert transcript["submitted"] is True
    listed = [entry["path"] for entry in transcript["raw_json"]["files"]]
    assert "agent/model-calls.jsonl" in listed
