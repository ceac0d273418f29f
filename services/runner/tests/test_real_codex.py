"""The real Codex CLI, as the catalog ships it, through the gateway, in bubblewrap, through
the model proxy, against the replay model server (the test double for OpenAI).

Set `SREFORGE_TEST_CODEX_EXECUTABLE` to the CLI (the npm `codex` launcher or the native
binary of `@openai/codex`); without it the test skips, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import replay
from realcli import changed_lines
from replay.conversations import codex as conversation
from sreforge_contracts import HarnessProfile, OperationalReadiness, ResolvedExecutionContext
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

KEY = "sk-real-openai-key-for-the-replay-0123"
CATALOG = Path(__file__).resolve().parents[3] / "agents"
EXECUTABLE = os.environ.get("SREFORGE_TEST_CODEX_EXECUTABLE", "")

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(
        not EXECUTABLE,
        reason="set SREFORGE_TEST_CODEX_EXECUTABLE to a codex CLI (npm @openai/codex) to run",
    ),
]


def _install_paths(executable: Path) -> tuple[str, ...]:
    """The npm prefix holding the CLI (launcher, platform package and its native binary),
    else the binary's package folder (`vendor/<triple>`, with `codex-path` and resources)."""
    real = executable.resolve()
    parts = real.parts
    if "node_modules" in parts:
        return (str(Path(*parts[: parts.index("node_modules")])),)
    return (str(real.parent.parent),)


def _profile(executable: Path, upstream: str) -> HarnessProfile:
    profile = load_profile(CATALOG / "codex.toml")
    assert profile.command is not None
    command = profile.command.model_copy(
        update={"executable": str(executable), "install_paths": _install_paths(executable)}
    )
    return profile.model_copy(
        update={
            "command": command,
            "model": conversation.MODEL,
            "metadata": {"upstream": f"{upstream}/v1"},
        }
    )


async def _session(project: Any, settings: RunnerSettings, script: replay.Script) -> Any:
    executable = Path(EXECUTABLE)
    with replay.ReplayServer(script, model=conversation.MODEL) as server:
        profile = _profile(executable, server.url)
        context = ResolvedExecutionContext(
            request_id="run-real-codex",
            profile=profile,
            readiness=OperationalReadiness(state="unverified"),
            proof_run=True,
        )
        box = HostSandbox(
            project.workspace,
            project.workspace.parent / "agent",
            settings,
            kind="host-sandboxed",
            install_paths=_install_paths(executable),
        )
        rein = CliAgentRein(profile, "# Checkout latency is high\n", run_id="run-real-codex")
        started = time.monotonic()
        run = await drive(context, rein, box, Budgets(150, 60, 60))
        return run, box, server, time.monotonic() - started


@pytest.mark.timeout(240)
async def test_the_real_codex_cli_submits_the_fix_through_the_proxy(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As shipped: codex gets only the proxy's token (in both variables it reads), sends
    plain HTTP Responses calls (no WebSocket attempt, no 401), edits with its own
    `apply_patch`, commits and submits the scenario's fix; the replay saw the real key
    as Bearer; calls and tokens land in `agent-transcript.json`; its rollout is kept."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    fix = project.fix.read_text()
    base = head_commit(project.workspace)
    script = conversation.fixed(fix)
    run, box, server, wall_s = await _session(project, settings, script)
    out = box.log_path.read_text()
    assert run.ok, (run.result.evidence, out[-4000:])
    assert script.spent == 3, out[-4000:]
    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, out[-4000:]
    assert sentinel.rca is not None
    assert "cache" in sentinel.rca
    assert changed_lines(workspace_diff(project.workspace, base)) == changed_lines(fix)

    calls = server.calls()
    assert len(calls) == 4  # three scripted turns and the closing answer
    assert {c.headers.get("authorization") for c in calls} == {f"Bearer {KEY}"}
    assert [r for r in server.received if "upgrade" in r.headers] == []
    assert {c.body["model"] for c in calls} == {conversation.MODEL}
    tools = {tool.get("name") for tool in calls[0].body["tools"]}
    assert {"exec_command", "apply_patch"} <= tools, tools

    logged = [
        json.loads(line) for line in (box.root / "model-calls.jsonl").read_text().splitlines()
    ]
    assert [(c["method"], c["path"], c["status"]) for c in logged] == [
        ("POST", "/v1/responses", 200)
    ] * 4
    transcript = json.loads((box.root / TRANSCRIPT_FILE).read_text())
    summary = transcript["raw_json"]["model_calls"]
    assert [(c["tokens_in"], c["tokens_out"]) for c in logged] == [
        (1200, 40),
        (1400, 300),
        (1600, 60),
        (100, 20),
    ]
    assert (summary["calls"], summary["tokens_in"], summary["tokens_out"]) == (4, 4300, 420)
    assert transcript["submitted"] is True
    rollouts = list((box.root / "native").glob(".codex/sessions/**/rollout-*.jsonl"))
    assert len(rollouts) == 1, transcript["raw_json"].get("native_files")

    assert "REDACTED" not in out  # the agent never had the key to leak
    for kept in box.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept
    assert KEY not in run.result.model_dump_json()
    assert run.dispatch is not None
    print(f"codex session: dispatch {run.dispatch.duration_ms / 1000:.2f} s, drive {wall_s:.2f} s")


@pytest.mark.timeout(240)
async def test_the_real_codex_cli_submits_a_ci_breaking_edit_as_made(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mistaken conversation: codex applies the fix, appends a syntax error, commits
    and submits; the submission holds exactly that (for CI to reject), nothing tidied."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fix = project.fix.read_text()
    base = head_commit(project.workspace)
    script = conversation.mistaken(fix)
    run, box, _, _ = await _session(project, settings, script)
    out = box.log_path.read_text()
    assert run.ok, (run.result.evidence, out[-4000:])
    assert script.spent == 4, out[-4000:]
    assert read_sentinel(project.workspace) is not None, out[-4000:]
    changed = changed_lines(workspace_diff(project.workspace, base))
    assert changed == [*changed_lines(fix), "+def guard(:", "+    pass"]
