"""The real Claude Code CLI, as shipped, through the gateway, in bubblewrap, via the proxy.

The model is the replay server (the test double for Anthropic's API): it plays
`replay.conversations.claude_code`. The CLI comes from `SREFORGE_TEST_CLAUDE_CODE_EXECUTABLE`
(an npm prefix's `node_modules/.bin/claude`); without it these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import replay
from realcli import changed_lines
from replay.conversations import claude_code
from sreforge_contracts import AgentTranscript, OperationalReadiness, ResolvedExecutionContext
from sreforge_runner import (
    TRANSCRIPT_FILE,
    Budgets,
    CliAgentRein,
    HostSandbox,
    RunnerSettings,
    drive,
    head_commit,
    load_profile,
    read_sentinel,
    workspace_diff,
)
from sreforge_runner._proxy import ModelProxy

CATALOG = Path(__file__).resolve().parents[3] / "agents"
KEY = "sk-ant-real-dummy-key-0123456789"
EXECUTABLE_ENV = "SREFORGE_TEST_CLAUDE_CODE_EXECUTABLE"

NEEDS_BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
pytestmark = pytest.mark.timeout(180)


def _post(url: str, token: str, document: dict[str, Any]) -> tuple[str, bytes]:
    headers = {"x-api-key": token, "content-type": "application/json"}
    request = urllib.request.Request(url, json.dumps(document).encode(), headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.headers["content-type"]), bytes(answer.read())


def test_the_anthropic_replay_speaks_messages_plain_and_streamed(tmp_path: Path) -> None:
    """Through the proxy, a scripted turn comes back as a Messages `message` (text, then
    `tool_use` with its input, stop reason `tool_use`) or as the API's event stream
    (the tool's input as `input_json_delta`), and the proxy counts both turns' tokens."""
    call = replay.ToolCall("Bash", {"command": "git status"})
    turns = [replay.Turn("Looking.", [call], 30, 7), replay.Turn("Done.", (), 40, 9)]
    with replay.ReplayServer(replay.Script(turns)) as server:
        proxy = ModelProxy("anthropic", server.url, KEY, tmp_path / "calls.jsonl")
        base = proxy.start()
        try:
            ask = {"model": "claude-x", "max_tokens": 10, "messages": [], "tools": []}
            kind, plain = _post(f"{base}/v1/messages?beta=true", proxy.token, ask)
            _, stream = _post(f"{base}/v1/messages", proxy.token, {**ask, "stream": True})
        finally:
            proxy.close()
    assert kind == "application/json"
    message = json.loads(plain)
    assert [block["type"] for block in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"command": "git status"}
    assert (message["stop_reason"], message["model"]) == ("tool_use", "claude-x")
    assert message["usage"] == {"input_tokens": 30, "output_tokens": 7}
    events = [line[7:] for line in stream.decode().splitlines() if line.startswith("event: ")]
    assert events == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert '"stop_reason": "end_turn"' in stream.decode()
    assert {call.headers["x-api-key"] for call in server.calls()} == {KEY}
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [(row["tokens_in"], row["tokens_out"]) for row in logged] == [(30, 7), (40, 9)]


@pytest.fixture
def executable() -> Path:
    """The real `claude` from the env, or a visible skip."""
    value = os.environ.get(EXECUTABLE_ENV)
    if not value:
        pytest.skip(f"set {EXECUTABLE_ENV} to a Claude Code executable to run the real CLI")
    path = Path(value)
    if not path.is_absolute() or not os.access(path, os.X_OK):
        pytest.fail(f"{EXECUTABLE_ENV}={value} is not an absolute executable path")
    return path


def _install_dir(executable: Path) -> str:
    """The folder to bind: the npm bin is a symlink into the package, so the one holding both."""
    return os.path.commonpath([executable.parent, executable.resolve().parent])


async def _session(
    project: Any,
    settings: RunnerSettings,
    monkeypatch: pytest.MonkeyPatch,
    executable: Path,
    script: replay.Script,
) -> tuple[Any, HostSandbox, replay.ReplayServer, str]:
    """One graded-style session of the catalog's claude-code profile against `script`."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    install = _install_dir(executable)
    profile = load_profile(CATALOG / "claude-code.toml")
    assert profile.command is not None
    command = profile.command.model_copy(
        update={"executable": str(executable), "install_paths": (install,)}
    )
    context_id = "run-real-claude"
    with replay.ReplayServer(script, model=claude_code.MODEL) as server:
        profile = profile.model_copy(
            update={
                "command": command,
                "model": claude_code.MODEL,
                "metadata": {"upstream": server.url},
            }
        )
        context = ResolvedExecutionContext(
            request_id=context_id,
            profile=profile,
            readiness=OperationalReadiness(state="unverified"),
            proof_run=True,
        )
        box = HostSandbox(
            project.workspace,
            project.workspace.parent / "agent",
            settings,
            kind="host-sandboxed",
            install_paths=(install,),
        )
        rein = CliAgentRein(profile, "# Checkout latency is high\n", run_id=context_id)
        run = await drive(context, rein, box, Budgets(150, 60, 60))
    return run, box, server, rein.session_id


def _assert_key_only_upstream(box: HostSandbox, server: replay.ReplayServer) -> None:
    """Every model call reached the replay with the real key; no file the agent wrote
    or the runner kept holds it, and nothing had to be scrubbed (the CLI never had it)."""
    calls = server.calls()
    assert calls, server.received
    assert {call.headers.get("x-api-key") for call in calls} == {KEY}
    assert all(call.body["model"] == claude_code.MODEL for call in calls)
    assert "REDACTED" not in box.log_path.read_text()
    for kept in box.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept


async def test_the_preset_turns_claude_codes_nonessential_traffic_off_unasked(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile of the claude-code preset with no env of its own still gets the quiet
    settings (no updater, telemetry, error reports or other traffic than the model's);
    a value the profile sets wins."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    profile = load_profile(CATALOG / "claude-code.toml")
    assert profile.command is not None
    command = profile.command.model_copy(
        update={
            "executable": "/bin/sh",
            "args": ("-c", "env | grep -E '^(DISABLE|CLAUDE_CODE)_' | sort"),
            "env": {"DISABLE_TELEMETRY": "0"},
        }
    )
    profile = profile.model_copy(update={"command": command, "sandbox": "host-open"})
    context = ResolvedExecutionContext(
        request_id="run-quiet",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-open"
    )
    run = await drive(context, CliAgentRein(profile, "# page\n"), box, Budgets(30, 30, 30))
    assert run.dispatch is not None, run.result.evidence
    assert box.log_path.read_text().split() == [
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        "DISABLE_AUTOUPDATER=1",
        "DISABLE_ERROR_REPORTING=1",
        "DISABLE_TELEMETRY=0",
    ]


@NEEDS_BWRAP
async def test_the_real_claude_code_submits_the_fix_through_the_proxy(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch, executable: Path
) -> None:
    """Claude Code reads, writes the fix, applies, commits and `submit --rca`s in
    bubblewrap; the diff is the scenario's fix; the proxy forwarded the real key; the
    calls, tokens and Claude's session file are in the agent's transcript."""
    base = head_commit(project.workspace)
    fix = project.fix.read_text()
    script = claude_code.fixed(fix)
    run, box, server, session = await _session(project, settings, monkeypatch, executable, script)
    out = box.log_path.read_text()
    assert run.ok, (run.result.evidence, out[-3000:])
    assert run.result.evidence.confinement == "host-sandboxed"
    assert script.spent == 4, out[-3000:]
    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, out[-3000:]
    assert sentinel.rca is not None
    assert "Root cause" in sentinel.rca
    assert changed_lines(workspace_diff(project.workspace, base)) == changed_lines(fix)
    _assert_key_only_upstream(box, server)
    first = server.calls()[0]
    assert {"Bash", "Read", "Write"} <= {tool["name"] for tool in first.body["tools"]}
    transcript = AgentTranscript.model_validate_json((box.root / TRANSCRIPT_FILE).read_text())
    assert transcript.submitted
    assert transcript.provider == "anthropic"
    raw: Any = transcript.raw_json
    summary = raw["model_calls"]
    calls = len(server.calls())
    assert (summary["calls"], summary["tokens_in"], summary["tokens_out"]) == (
        calls,
        100 * calls,
        20 * calls,
    )
    assert summary["cost_usd"] is not None
    native = raw["native_files"]
    assert [name for name in native if name.endswith(f"/{session}.jsonl")], native


@NEEDS_BWRAP
async def test_a_mistaken_claude_code_session_is_recorded_as_no_submission(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch, executable: Path
) -> None:
    """A corrupt patch: `git apply` fails, the model stops; nothing is submitted or
    changed, the transcript says so, and git's refusal is in the agent's output."""
    base = head_commit(project.workspace)
    script = claude_code.mistaken(project.fix.read_text())
    run, box, server, _ = await _session(project, settings, monkeypatch, executable, script)
    out = box.log_path.read_text()
    assert run.dispatch is not None, (run.result.evidence, out[-3000:])
    assert run.dispatch.exit_code == 0, out[-3000:]
    assert script.spent == 3, out[-3000:]
    assert read_sentinel(project.workspace) is None
    assert workspace_diff(project.workspace, base) == ""
    assert "corrupt patch" in out
    _assert_key_only_upstream(box, server)
    transcript = AgentTranscript.model_validate_json((box.root / TRANSCRIPT_FILE).read_text())
    assert not transcript.submitted
    raw: Any = transcript.raw_json
    assert raw["model_calls"]["calls"] == len(server.calls())
