"""The whole transcript is kept: refused calls logged, files capped and redacted, the
native session files collected, and how the agent ended (exit code, budget, stderr)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import OperationalReadiness, ResolvedExecutionContext
from sreforge_runner import (
    SESSION_FILES,
    Budgets,
    CliAgentRein,
    HostSandbox,
    RunnerSettings,
    collect_native,
    drive,
    kept_files,
    load_profile,
)
from sreforge_runner import _proxy as proxy_module
from sreforge_runner._handoff import _collect
from sreforge_runner._kept import agent_exit, keep_file
from sreforge_runner._proxy import ModelProxy

KEY = "sk-upstream-real-key-77"
CATALOG = Path(__file__).resolve().parents[3] / "agents"


def _post(url: str, headers: dict[str, str], body: bytes = b'{"model": "m-1"}') -> int:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_refused_calls_are_logged_with_their_status_and_no_secret(tmp_path: Path) -> None:
    """A missing token, a wrong one (401), an upgrade (501) and an unreachable upstream
    (502) are each a line of the log with its status and error; the credential headers
    a refused call carried are named, never their values; neither the key nor the token
    is in the log."""
    log = tmp_path / "model-calls.jsonl"
    proxy = ModelProxy("openai", f"http://127.0.0.1:{_closed_port()}/v1", KEY, log)
    base = proxy.start()
    token = {"Authorization": f"Bearer {proxy.token}"}
    try:
        statuses = [
            _post(f"{base}/responses", {}),
            _post(f"{base}/responses", {"Authorization": "Bearer sk-wrong-token-123"}),
            _post(f"{base}/responses", {**token, "Upgrade": "websocket", "Connection": "Upgrade"}),
            _post(f"{base}/responses", token),
        ]
    finally:
        proxy.close()
    assert statuses == [401, 401, 501, 502]
    calls = _calls(log)
    assert [(c["status"], c["model"], c["path"]) for c in calls] == [
        (401, "m-1", "/v1/responses"),
        (401, "m-1", "/v1/responses"),
        (501, "m-1", "/v1/responses"),
        (502, "m-1", "/v1/responses"),
    ]
    assert [c.get("credential") for c in calls] == [[], ["authorization"], None, None]
    assert all(c["error"] for c in calls), calls
    text = log.read_text()
    for secret in (KEY, proxy.token, "sk-wrong-token-123"):
        assert secret not in text


def test_the_log_redacts_the_key_and_token_and_keeps_within_its_body_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body quoting the token or the key is logged redacted; past the session's body
    budget a call is still logged (status, sizes) without its bodies, and says so."""
    monkeypatch.setattr(proxy_module, "_BODY_BUDGET", 200)
    log = tmp_path / "model-calls.jsonl"
    proxy = ModelProxy("openai", f"http://127.0.0.1:{_closed_port()}/v1", KEY, log, "OPENAI_KEY")
    base = proxy.start()
    try:
        quoted = json.dumps({"model": "m-1", "note": f"{proxy.token} {KEY}"}).encode()
        _post(f"{base}/x", {}, quoted)
        _post(f"{base}/x", {}, b'{"model": "m-2", "pad": "' + b"p" * 300 + b'"}')
    finally:
        proxy.close()
    first, second = _calls(log)
    assert "[REDACTED:MODEL_PROXY_TOKEN] [REDACTED:OPENAI_KEY]" in first["request"]
    assert (second["request"], second["bodies_dropped"]) == (None, "over the log's budget")
    assert second["request_bytes"] > 300


def test_a_file_past_its_cap_keeps_head_and_tail_and_says_what_was_cut(tmp_path: Path) -> None:
    """Cut at line boundaries with a marker (a JSON line in a JSONL file), secrets
    redacted, the cut and the redactions counted."""
    source = tmp_path / "stream.jsonl"
    lines = [
        json.dumps({"n": n, "text": "secret-value-1" if n == 0 else "x" * 40}) for n in range(400)
    ]
    source.write_text("\n".join(lines) + "\n")
    kept = keep_file(
        source, source, cap=10_000, secrets={"S": "secret-value-1"}, name="stream.jsonl"
    )
    out = source.read_text().splitlines()
    parsed = [json.loads(line) for line in out]
    assert (parsed[0]["n"], parsed[-1]["n"]) == (0, 399)
    (marker,) = [entry for entry in parsed if "truncated_bytes" in entry]
    assert marker["truncated_bytes"] == kept.truncated_bytes > 0
    assert kept.redactions == 1
    assert "[REDACTED:S]" in out[0]
    assert kept.size == source.stat().st_size <= 10_000
    again = keep_file(source, source, cap=10_000, secrets={"S": "secret-value-1"}, name="x.jsonl")
    assert (again.truncated_bytes, again.size) == (0, kept.size), "sealing twice changes nothing"


def test_every_preset_has_session_globs_and_the_copy_refuses_symlinks(tmp_path: Path) -> None:
    """Each CLI preset names where its sessions live; matching files are copied redacted
    into `native/`, a symlink out of HOME is not followed."""
    assert set(SESSION_FILES) == {"claude-code", "codex", "gemini-cli", "aider", "mini-swe-agent"}
    home = tmp_path / "home"
    session = home / ".gemini" / "tmp" / "abc" / "chats" / "session-1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text('{"text": "token sk-proxy-abcdef"}\n')
    (tmp_path / "host.json").write_text("{}")
    (home / ".gemini" / "tmp" / "abc" / "leak.json").symlink_to(tmp_path / "host.json")
    copied = collect_native(
        "gemini-cli", home, tmp_path / "agent" / "native", {"T": "sk-proxy-abcdef"}
    )
    assert [found.name for found in copied] == ["native/.gemini/tmp/abc/chats/session-1.jsonl"]
    assert copied[0].redactions == 1
    assert "[REDACTED:T]" in (tmp_path / "agent" / copied[0].name).read_text()


def test_the_stderr_tail_is_the_last_lines_and_counts_them_all(tmp_path: Path) -> None:
    """Only stderr lines, the last 20 of them, each capped; the count is of all."""
    stream = tmp_path / "stream.jsonl"
    entries = [{"stream": "stdout", "text": "out"}]
    entries += [
        {"stream": "stderr", "text": f"err {n}" + "!" * (1000 if n == 29 else 0)} for n in range(30)
    ]
    stream.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    ended = agent_exit(stream, 2, None)
    assert (ended.exit_code, ended.stderr_lines, len(ended.stderr_tail)) == (2, 30, 20)
    assert ended.stderr_tail[0] == "err 10"
    assert len(ended.stderr_tail[-1]) == 400
    assert (ended.failed, ended.summary()) == (True, "exit code 2")


# The agent: one call without its token, its token on stdout and stderr, a Claude-like
# session file quoting the token, then a failure.
FAILING_AGENT = (
    'curl -sS -o /dev/null -w "%{http_code}\\n" -d \'{"model": "m-1"}\' '
    '"$ANTHROPIC_BASE_URL/v1/messages"; '
    'echo "token=$ANTHROPIC_API_KEY"; '
    'mkdir -p "$HOME/.claude/projects/ws" && '
    'echo "{\\"said\\": \\"$ANTHROPIC_API_KEY\\"}" > "$HOME/.claude/projects/ws/s.jsonl"; '
    'for n in 1 2 3; do echo "trace line $n" >&2; done; '
    'echo "fatal: $ANTHROPIC_API_KEY rejected" >&2; exit 3'
)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_a_failing_agent_in_bubblewrap_leaves_a_whole_redacted_transcript(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """claude-code's preset with a failing stand-in CLI, in bubblewrap, through the proxy:
    its refused call is logged (401), its session file is collected into `native/`, the
    output, stream and session file carry no token, `agent-transcript.json` lists what
    exists by paths relative to the run folder, and the submission names those files and
    says exit code 3 with the last stderr lines, redacted."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    profile = load_profile(CATALOG / "claude-code.toml")
    assert profile.command is not None
    command = profile.command.model_copy(
        update={"executable": "/bin/sh", "args": ("-c", FAILING_AGENT)}
    )
    upstream = f"http://127.0.0.1:{_closed_port()}"
    profile = profile.model_copy(update={"command": command, "metadata": {"upstream": upstream}})
    context = ResolvedExecutionContext(
        request_id="run-kept",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    rein = CliAgentRein(profile, "# page\n", run_id="run-kept")
    run = await drive(context, rein, box, Budgets(60, 30, 30))
    assert run.dispatch is not None
    assert run.dispatch.exit_code == 3, run.result.evidence
    submission = _collect("claude-code", box, "HEAD", run, {})

    names = kept_files(box.root)
    assert submission.agent_files == names
    assert set(names) == {
        "output.log",
        "stream.jsonl",
        "model-calls.jsonl",
        "agent-transcript.json",
        "native/.claude/projects/ws/s.jsonl",
    }
    assert submission.agent_dir == str(box.root.resolve())
    assert submission.transcript_ref == "agent/agent-transcript.json"
    assert (box.root.parent / submission.transcript_ref).is_file()
    assert not box.home.exists(), "HOME goes with the sandbox; the copies stay"
    (call,) = _calls(box.root / "model-calls.jsonl")
    assert (call["status"], call["credential"]) == (401, [])
    for name in names:
        text = (box.root / name).read_text()
        assert "sk-proxy-" not in text, name
        assert KEY not in text, name
    assert "[REDACTED:MODEL_PROXY_TOKEN]" in (box.root / "output.log").read_text()
    transcript = json.loads((box.root / "agent-transcript.json").read_text())
    listed = [entry["path"] for entry in transcript["raw_json"]["files"]]
    assert set(listed) == {f"agent/{name}" for name in names} - {"agent/agent-transcript.json"}
    assert all((box.root.parent / path).is_file() for path in listed)
    assert transcript["raw_json"]["native_files"] == [".claude/projects/ws/s.jsonl"]
    ended = submission.agent_exit
    assert ended is not None
    assert (ended.exit_code, ended.timeout, ended.stderr_lines) == (3, None, 4)
    assert ended.stderr_tail == (
        "trace line 1",
        "trace line 2",
        "trace line 3",
        "fatal: [REDACTED:MODEL_PROXY_TOKEN] rejected",
    )
    assert os.environ["ANTHROPIC_API_KEY"] not in submission.model_dump_json()


async def test_the_budget_that_fired_is_the_agents_exit(
    project: Any, settings: RunnerSettings
) -> None:
    """An agent that talks once on stderr then hangs: the idle budget fires, and the
    submission says so (the exit code is the SIGTERM that stopped it), with what it last
    said."""
    profile = load_profile(CATALOG / "aider.toml")
    assert profile.command is not None
    script = 'echo "waiting for a model that never answers" >&2; exec sleep 60'
    command = profile.command.model_copy(update={"executable": "/bin/sh", "args": ("-c", script)})
    profile = profile.model_copy(
        update={"command": command, "metadata": {"proxy": "off"}, "credential_routes": ()}
    )
    context = ResolvedExecutionContext(
        request_id="run-idle",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    box = HostSandbox(project.workspace, project.workspace.parent / "agent", settings)
    run = await drive(context, CliAgentRein(profile, "# page\n"), box, Budgets(30, 1.0, 10))
    submission = _collect("aider", box, "HEAD", run, {})
    ended = submission.agent_exit
    assert ended is not None
    assert (ended.exit_code, ended.timeout) == (-15, "idle"), run.result.evidence
    assert ended.stderr_tail == ("waiting for a model that never answers",)
    assert ended.summary() == "the idle budget fired"
    assert submission.stop_reason == "timeout:idle"
