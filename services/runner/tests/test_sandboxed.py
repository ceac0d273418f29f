"""host-sandboxed (bubblewrap): what the agent cannot see, the watchdog, the command rein."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import (
    AgentTranscript,
    CommandSpec,
    HarnessProfile,
    OperationalReadiness,
    ProfileLimits,
    ResolvedExecutionContext,
)
from sreforge_runner import (
    TRANSCRIPT_FILE,
    Budgets,
    CliAgentRein,
    CommandRein,
    HostSandbox,
    RunnerSettings,
    collect_native,
    drive,
    head_commit,
    read_sentinel,
    workspace_diff,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

FIXTURES = Path(__file__).parent / "fixtures"
HERE = Path(__file__).parent


def _context(profile: HarnessProfile) -> ResolvedExecutionContext:
    return ResolvedExecutionContext(
        request_id="run-sandboxed",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )


def _profile(**fields: Any) -> HarnessProfile:
    return HarnessProfile(name="probe", rein="scripted", sandbox="host-sandboxed", **fields)


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A secret in the harness's env and a canary file inside the harness tree."""
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("SREFORGE_CANARY_SECRET", secret)
    canary = HERE / f".canary-{uuid.uuid4().hex}"
    content = f"canary-{uuid.uuid4().hex}"
    canary.write_text(content)
    try:
        yield {"secret": secret, "file": str(canary), "content": content}
    finally:
        canary.unlink(missing_ok=True)


async def test_the_sandboxed_agent_cannot_read_harness_secrets_or_evaluation_data(
    project: Any, settings: RunnerSettings, canaries: dict[str, str]
) -> None:
    """A harness env secret, a harness-tree file, the scenario's verify/ and solution/, /work
    and /root are invisible; the host's processes are not in its PID namespace."""
    scenario: Path = project.scenario_dir
    probe = project.workspace.parent / "probe.sh"
    probe.write_text(
        "env\n"
        f"cat {canaries['file']} || echo CANARY-FILE-HIDDEN\n"
        f"ls {scenario / 'verify'} || echo VERIFY-HIDDEN\n"
        f"cat {scenario / 'solution' / 'fix.patch'} || echo SOLUTION-HIDDEN\n"
        "ls /work || echo WORK-HIDDEN\n"
        "ls /root || echo ROOT-HIDDEN\n"
        f"kill -0 {os.getpid()} || echo HOST-PID-HIDDEN\n"
        "touch /usr/escape || echo USR-READONLY\n"
    )
    sandbox = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    # The probe script itself is outside the sandbox: run it through stdin-less sh -c.
    rein = CommandRein("probe", ("/bin/sh", "-c", probe.read_text()))
    run = await drive(_context(_profile()), rein, sandbox, Budgets(60))
    out = sandbox.log_path.read_text()
    assert run.result.evidence.confinement == "host-sandboxed", run.result.evidence
    for hidden in (
        "CANARY-FILE-HIDDEN",
        "VERIFY-HIDDEN",
        "SOLUTION-HIDDEN",
        "WORK-HIDDEN",
        "ROOT-HIDDEN",
        "HOST-PID-HIDDEN",
        "USR-READONLY",
    ):
        assert hidden in out, out
    assert canaries["secret"] not in out
    assert canaries["content"] not in out
    assert "SREFORGE_CANARY_SECRET" not in out
    assert "HOME=/home/agent" in out.splitlines()
    published = run.result.evidence.model_dump_json()
    assert canaries["secret"] not in published


async def test_an_agent_that_hangs_without_output_is_stopped_by_the_watchdog(
    project: Any, settings: RunnerSettings
) -> None:
    """idle fires (not total), is recorded, and no process of the agent survives."""
    sandbox = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    script = "echo started; (setsid sleep 300 &); sleep 300 & wait"
    rein = CommandRein("hang", ("/bin/sh", "-c", script))
    profile = _profile(limits=ProfileLimits(session_start_s=30, idle_s=1, total_s=60))
    run = await drive(_context(profile), _Watched(rein), sandbox, Budgets(60, 1.0, 30))
    evidence = run.result.evidence
    assert evidence.timeout == "idle"
    assert evidence.failure_stage == "execution"
    assert evidence.survivors == 0
    assert sandbox.survivors() == []
    assert run.dispatch is not None
    assert run.dispatch.duration_ms < 30_000


class _Watched:
    """A script rein that runs under all three budgets (built-ins only use total)."""

    def __init__(self, inner: CommandRein) -> None:
        self.inner = inner
        self.name = inner.name

    async def start_session(self, sandbox: HostSandbox) -> None:
        """Nothing to start."""

    async def dispatch(self, sandbox: HostSandbox, budgets: Budgets) -> Any:
        """Run under every budget."""
        outcome = await sandbox.run(self.inner.argv, budgets)
        from sreforge_runner import Dispatch

        return Dispatch(
            stop_reason=f"timeout:{outcome.timeout}" if outcome.timeout else "exited",
            duration_ms=outcome.duration_s * 1000,
            exit_code=outcome.exit_code,
            timeout=outcome.timeout,
        )

    async def end_session(self, sandbox: HostSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: HostSandbox) -> None:
        """Nothing to clean."""


@pytest.mark.parametrize("fallback", [None, "host-open"])
async def test_a_sandbox_that_cannot_be_made_is_refused_or_honestly_downgraded(
    project: Any, tmp_path: Path, fallback: Any
) -> None:
    """bwrap failing: without a fallback the run stops at sandbox_create; with one it runs
    host-open and the evidence says host-open, with why."""
    settings = RunnerSettings(bwrap_path="/bin/false", readiness_dir=tmp_path / "r")
    sandbox = HostSandbox(
        project.workspace, tmp_path / "agent", settings, kind="host-sandboxed", fallback=fallback
    )
    rein = CommandRein("true", ("/bin/true",))
    run = await drive(_context(_profile(sandbox_fallback=fallback)), rein, sandbox, Budgets(30))
    evidence = run.result.evidence
    if fallback is None:
        assert evidence.failure_stage == "sandbox_create"
        assert evidence.confinement is None
        assert evidence.sandbox_destroy == "succeeded"
    else:
        assert run.ok, evidence
        assert evidence.confinement == "host-open"
        assert evidence.sandbox_requested == "host-sandboxed"
        assert "bwrap exited" in str(evidence.metadata["sandbox_downgrade"])


async def test_a_cli_agent_runs_through_the_command_rein_inside_bubblewrap(
    project: Any, settings: RunnerSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page reaches the agent, stdin is closed, `submit --rca` works inside the sandbox,
    the diff is captured, output is stamped into the transcript, and only the routed
    credential (never a value in the evidence) reaches it."""
    install = tmp_path / "fake-install"
    install.mkdir()
    shutil.copy(FIXTURES / "fake-agent", install / "fake-agent")
    monkeypatch.setenv("FAKE_AGENT_TOKEN", "tok-routed-value")
    monkeypatch.setenv("SREFORGE_CANARY_SECRET", "never-routed")
    target = "cache_settings.py"
    profile = HarnessProfile(
        name="fake-cli",
        rein="command",
        sandbox="host-sandboxed",
        model="fake-1",
        credential_routes=("FAKE_AGENT_TOKEN",),
        limits=ProfileLimits(session_start_s=30, idle_s=30, total_s=60),
        command=CommandSpec(
            preset="custom",
            executable=str(install / "fake-agent"),
            args=("--prompt-file", "{prompt_file}"),
            install_paths=(str(install),),
        ),
    )
    base = head_commit(project.workspace)
    page = f"# Checkout latency is high\n\nEdit file: {target}\n"
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        install_paths=(str(install),),
    )
    run = await drive(_context(profile), CliAgentRein(profile, page), sandbox, Budgets(60, 30, 30))
    log = sandbox.log_path.read_text()
    assert run.ok, (run.result.evidence, log)
    assert run.result.evidence.confinement == "host-sandboxed"
    assert run.result.evidence.proof_run
    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, log
    assert sentinel.rca is not None
    assert "TTL" in sentinel.rca
    assert "+TTL = 60" in workspace_diff(project.workspace, base).splitlines()
    lines = [json.loads(line) for line in sandbox.transcript_path.read_text().splitlines()]
    assert {line["stream"] for line in lines} == {"stdout", "stderr"}
    assert all(line["t"] for line in lines)
    texts = [line["text"] for line in lines]
    assert "fake-agent: stdin closed" in texts
    assert "token routed: yes" in texts
    assert "careless debug line: key=[REDACTED:FAKE_AGENT_TOKEN]" in texts
    published = run.result.model_dump_json()
    assert "tok-routed-value" not in published
    assert "Checkout latency" not in published
    assert not (sandbox.session_dir / "page.md").exists()
    transcript = AgentTranscript.model_validate_json((sandbox.root / TRANSCRIPT_FILE).read_text())
    assert (transcript.confinement, transcript.harness, transcript.model) == (
        "host-sandboxed",
        "fake-cli",
        "fake-1",
    )
    assert transcript.submitted
    assert isinstance(transcript.raw_json, dict)
    assert transcript.raw_json["redactions"] == 2  # the same line in output.log and stream.jsonl
    for kept in (sandbox.log_path, sandbox.transcript_path, sandbox.root / TRANSCRIPT_FILE):
        assert "tok-routed-value" not in kept.read_text(), kept


async def test_mini_swe_agents_own_submission_counts_and_its_trajectory_is_kept(
    project: Any, settings: RunnerSettings
) -> None:
    """A mini-swe-agent-preset session: its trajectory (exit_status Submitted) is copied
    out of HOME before HOME goes, and counts as `submit`."""
    script = (
        "printf 'TTL = 60\\n' > tuned.py; mkdir -p \"$HOME/session\"; "
        '\'printf\' \'{"info": {"exit_status": "Submitted"}, "messages": []}\' '
        '> "$HOME/session/traj.json"'
    )
    profile = HarnessProfile(
        name="mini",
        rein="command",
        sandbox="host-sandboxed",
        command=CommandSpec(preset="mini-swe-agent", executable="/bin/sh", args=("-c", script)),
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    run = await drive(
        _context(profile), CliAgentRein(profile, "# page\n"), box, Budgets(60, 30, 30)
    )
    assert run.ok, (run.result.evidence, box.log_path.read_text())
    assert read_sentinel(project.workspace) is not None
    kept = box.root / "native" / "session" / "traj.json"
    assert json.loads(kept.read_text())["info"]["exit_status"] == "Submitted"
    assert not box.home.exists()
    transcript = json.loads((box.root / TRANSCRIPT_FILE).read_text())
    assert transcript["raw_json"]["completeness"]["session_file_found"] is True
    assert transcript["raw_json"]["native_files"] == ["session/traj.json"]


def test_native_collection_never_follows_the_agents_symlinks(tmp_path: Path) -> None:
    """HOME is the agent's: a symlinked session file or folder cannot pull host files in."""
    home = tmp_path / "home"
    (home / "session").mkdir(parents=True)
    secret = tmp_path / "host-secret.json"
    secret.write_text('{"host": "only"}')
    (home / "session" / "traj.json").symlink_to(secret)
    (home / ".claude").mkdir()
    (home / ".claude" / "projects").symlink_to(tmp_path)
    (tmp_path / "x.jsonl").write_text("host file\n")
    assert collect_native("mini-swe-agent", home, tmp_path / "out", {}) == []
    assert collect_native("claude-code", home, tmp_path / "out", {}) == []
