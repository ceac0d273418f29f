"""The real Gemini CLI, as shipped (`agents/gemini-cli.toml`), through the gateway in
bubblewrap and the model proxy, against the replay model server (the named test double).

The CLI comes from `SREFORGE_TEST_GEMINI_CLI_EXECUTABLE` (e.g. an npm prefix's
`node_modules/.bin/gemini`); without it the test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import replay
from realcli import changed_lines
from replay.conversations import gemini_cli
from sreforge_contracts import OperationalReadiness, ResolvedExecutionContext
from sreforge_runner import (
    TRANSCRIPT_FILE,
    Budgets,
    CliAgentRein,
    HostSandbox,
    RunnerSettings,
    drive,
    find_profile,
    head_commit,
    read_sentinel,
    workspace_diff,
)
from sreforge_runner._presets import proxy_plan

ENV = "SREFORGE_TEST_GEMINI_CLI_EXECUTABLE"
KEY = "AIza-real-test-key-0123456789abcdef"
REPO_ROOT = Path(__file__).resolve().parents[3]
_PROBE = "echo key=${GEMINI_API_KEY:-absent}"

_NEEDS_BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
_NEEDS_CLI = pytest.mark.skipif(
    not os.environ.get(ENV), reason=f"{ENV} is not set (the path of a real `gemini`)"
)


class _ProbeFirst(replay.Script):
    """The conversation after one extra first turn: the model asks the shell for the key."""

    def __init__(self, inner: replay.Script) -> None:
        super().__init__([])
        self._inner = inner
        self._probed = False

    def answer(self, request: replay.Received) -> replay.Turn:
        """The probe for the first main-loop call, then the conversation's turns."""
        if self._probed or not _main_loop(request):
            return self._inner.answer(request)
        self._probed = True
        call = replay.ToolCall("run_shell_command", {"command": _PROBE})
        return replay.Turn(text="Checking the environment.", tool_calls=[call])


def _main_loop(request: replay.Received) -> bool:
    body = request.body if isinstance(request.body, dict) else {}
    return request.flavor_path.endswith(":streamGenerateContent") and bool(body.get("tools"))


def _install_root(executable: Path) -> Path:
    """The npm prefix holding the CLI (the `gemini` link points into its node_modules)."""
    for folder in executable.resolve().parents:
        if folder.name == "node_modules":
            return folder.parent
    return executable.resolve().parent


def test_the_preset_writes_the_auth_settings_gemini_cli_accepts() -> None:
    """The shipped profile's proxy plan writes `~/.gemini/settings.json` selecting the
    API-key auth (0.61 picks `gateway` for a base URL, then rejects it), with telemetry,
    usage statistics and update checks off."""
    plan = proxy_plan(find_profile(REPO_ROOT / "agents", "gemini-cli"))
    assert plan is not None
    files = dict(plan.config_files)
    assert set(files) == {".gemini/settings.json"}
    settings = json.loads(files[".gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["telemetry"]["enabled"] is False
    assert settings["general"] == {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
    }


def test_the_agents_git_identity_survives_a_shell_that_hides_the_global_config(
    project: Any, settings: RunnerSettings
) -> None:
    """gemini-cli's shell runs git with `GIT_CONFIG_GLOBAL=/dev/null`: a commit there still
    gets the runner's neutral identity (the workspace's own config), and nothing of it
    shows in the submission's diff."""
    sandbox = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-open"
    )
    base = head_commit(project.workspace)
    sandbox.create()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(HOME=str(sandbox.home), GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
        (project.workspace / "tuned.py").write_text("TTL = 60\n")
        for args in (["add", "tuned.py"], ["commit", "-qm", "Tune the TTL"]):
            done = subprocess.run(
                ["git", *args], cwd=project.workspace, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr
        author = subprocess.run(
            ["git", "log", "-1", "--format=%an <%ae>|%cn <%ce>"],
            cwd=project.workspace,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        identity = f"{settings.agent_git_name} <{settings.agent_git_email}>"
        assert author == f"{identity}|{identity}"
        assert changed_lines(workspace_diff(project.workspace, base)) == ["+TTL = 60"]
    finally:
        sandbox.destroy()


@pytest.mark.timeout(300)
@_NEEDS_BWRAP
@_NEEDS_CLI
async def test_the_real_gemini_cli_fixes_commits_and_submits_through_the_proxy(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped profile runs the real CLI headless: its auth settings are accepted, it
    reads, applies the fix, commits (its shell hides the global git config) and submits;
    the proxy forwards the real key (in `x-goog-api-key`), which the CLI never sees, and
    the model calls and tokens are in `agent-transcript.json`."""
    executable = Path(os.environ[ENV])
    install = _install_root(executable)
    shipped = find_profile(REPO_ROOT / "agents", "gemini-cli")
    assert shipped.command is not None
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    fix = project.fix.read_text()
    script = _ProbeFirst(gemini_cli.fixed(fix))
    with replay.ReplayServer(script, model=gemini_cli.MODEL) as server:
        profile = shipped.model_copy(
            update={
                "model": gemini_cli.MODEL,
                "metadata": {**shipped.metadata, "upstream": server.url},
                "command": shipped.command.model_copy(
                    update={"executable": str(executable), "install_paths": (str(install),)}
                ),
            }
        )
        base = head_commit(project.workspace)
        sandbox = HostSandbox(
            project.workspace,
            project.workspace.parent / "agent",
            settings,
            kind="host-sandboxed",
            install_paths=(str(install),),
        )
        context = ResolvedExecutionContext(
            request_id="run-real-gemini",
            profile=profile,
            readiness=OperationalReadiness(state="unverified"),
            proof_run=True,
        )
        started = time.monotonic()
        run = await drive(
            context, CliAgentRein(profile, "# Latency is high\n"), sandbox, Budgets(120, 120, 240)
        )
        elapsed = time.monotonic() - started
    log = sandbox.log_path.read_text()
    assert run.ok, (run.result.evidence, log[-3000:])
    assert run.result.evidence.confinement == "host-sandboxed"
    print(f"gemini-cli session: {elapsed:.1f} s, {len(server.received)} requests")

    assert read_sentinel(project.workspace) is not None, log[-3000:]
    assert changed_lines(workspace_diff(project.workspace, base)) == changed_lines(fix)
    assert head_commit(project.workspace) != base, "the fix was not committed"

    calls = server.calls()
    assert calls, [r.path for r in server.received]
    assert {r.headers.get("x-goog-api-key") for r in calls} == {KEY}
    assert all(
        r.flavor_path == f"/v1beta/models/{gemini_cli.MODEL}:streamGenerateContent" for r in calls
    ), [r.path for r in calls]
    echoed = json.dumps([r.body for r in calls])
    assert "key=" in echoed, "the probe's output is missing"
    assert "key=absent" not in echoed, "the CLI got no key at all"
    assert KEY not in echoed, "the CLI's shell saw the real key"

    transcript = json.loads((sandbox.root / TRANSCRIPT_FILE).read_text())
    assert transcript["submitted"] is True
    model_calls = transcript["raw_json"]["model_calls"]
    assert model_calls["calls"] == len(calls)
    default = replay.Turn()  # every turn here keeps the default token counts
    assert model_calls["tokens_in"] == default.tokens_in * len(calls)
    assert model_calls["tokens_out"] == default.tokens_out * len(calls)
    steps = [
        json.loads(line["text"])
        for line in transcript["raw_json"]["lines"]
        if line["stream"] == "stdout" and line["text"].startswith("{")
    ]
    kinds = {step.get("type") for step in steps}
    assert {"init", "tool_use", "tool_result", "result"} <= kinds, kinds
    for kept in sandbox.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept
