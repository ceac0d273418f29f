"""Profiles resolve to reins; the gateway always cleans up and reports the first failure."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from processes import gone
from sreforge_contracts import (
    HarnessProfile,
    OperationalReadiness,
    ResolvedExecutionContext,
    load_scenario,
)
from sreforge_runner import (
    Budgets,
    CommandRein,
    Dispatch,
    HostSandbox,
    NoopRein,
    ProfileError,
    RunnerSettings,
    drive,
    head_commit,
    read_sentinel,
    resolve_rein,
    workspace_diff,
)


def context(rein: str = "scripted") -> ResolvedExecutionContext:
    """A resolved context for a ready built-in profile."""
    return ResolvedExecutionContext(
        request_id="run-test",
        profile=HarnessProfile(name=rein, rein=rein),  # type: ignore[arg-type]
        readiness=OperationalReadiness(state="ready", evidence="test"),
        proof_run=False,
    )


def test_builtin_profiles_resolve(project: Any, settings: RunnerSettings) -> None:
    """noop, reference, scripted:<negative> and scripted with a `script` label."""
    scenario_dir: Path = project.scenario_dir
    scenario = load_scenario(scenario_dir)
    negative: Path = project.negative
    assert isinstance(resolve_rein("noop", {}, None, settings), NoopRein)
    reference = resolve_rein("reference", {}, scenario, settings)
    assert isinstance(reference, CommandRein)
    assert str((scenario_dir / "solution" / "fix.patch").resolve()) in reference.argv
    named = resolve_rein(f"scripted:{negative.stem}", {}, scenario, settings)
    assert isinstance(named, CommandRein)
    assert str(negative.resolve()) in named.argv
    labelled = resolve_rein("scripted", {"script": str(negative)}, scenario, settings)
    assert isinstance(labelled, CommandRein)
    assert labelled.argv == named.argv


def test_a_shell_script_runs_with_sh_e(tmp_path: Path) -> None:
    """A non-patch script is run by `sh -e`, from the configured scripts dir."""
    (tmp_path / "kill-load.sh").write_text("true\n")
    settings = RunnerSettings(scripts_dir=tmp_path)
    rein = resolve_rein("scripted:kill-load", {}, None, settings)
    assert isinstance(rein, CommandRein)
    assert rein.argv == ("/bin/sh", "-e", str((tmp_path / "kill-load.sh").resolve()))


@pytest.mark.parametrize(
    ("profile", "labels", "message"),
    [
        ("claude-code", {}, "unknown profile"),
        ("reference", {}, "scenario folder was not found"),
        ("scripted", {}, "no `script` label"),
        ("scripted", {"script": "/nonexistent/x.sh"}, "does not exist"),
        ("scripted:missing", {}, "no missing[.patch|.sh]"),
        ("scripted:../x", {}, "plain file name"),
    ],
)
def test_unresolvable_profiles_say_why(profile: str, labels: dict[str, str], message: str) -> None:
    """A profile that cannot run is refused before any sandbox exists, naming the problem."""
    with pytest.raises(ProfileError, match=message.replace("[", r"\[").replace(".", r"\.")):
        resolve_rein(profile, labels, None, RunnerSettings())


@dataclass
class Flaky:
    """A rein whose stages fail on demand and which logs what was called."""

    fail: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    name: str = "flaky"

    def _call(self, stage: str) -> None:
        self.calls.append(stage)
        if stage in self.fail:
            raise RuntimeError(f"{stage} broke")

    async def start_session(self, sandbox: HostSandbox) -> None:
        self._call("start")

    async def dispatch(self, sandbox: HostSandbox, budgets: Budgets) -> Dispatch:
        self._call("dispatch")
        return Dispatch(stop_reason="exited", duration_ms=1.0, exit_code=0)

    async def end_session(self, sandbox: HostSandbox) -> None:
        self._call("end")

    async def cleanup_session(self, sandbox: HostSandbox) -> None:
        self._call("cleanup")


async def test_a_failed_start_still_cleans_up_and_is_the_primary_failure(
    tiny_repo: Path, tmp_path: Path
) -> None:
    """session_start fails → no dispatch, cleanup and destroy still run and are reported
    separately; the first failure stays primary."""
    rein = Flaky(fail={"start", "cleanup"})
    sandbox = HostSandbox(tiny_repo, tmp_path / "agent", RunnerSettings())
    run = await drive(context(), rein, sandbox, Budgets(5))
    assert rein.calls == ["start", "cleanup"]
    assert run.dispatch is None
    evidence = run.result.evidence
    assert [f.stage for f in evidence.failures] == ["session_start", "teardown"]
    assert run.primary is not None
    assert run.primary.error == "RuntimeError: start broke"
    assert (evidence.failure_stage, evidence.outcome) == ("session_start", "failed")
    assert (evidence.session_cleanup, evidence.sandbox_destroy) == ("failed", "succeeded")
    assert not run.ok
    assert not sandbox.home.exists()  # destroy ran


async def test_a_sandbox_that_cannot_be_created_stops_before_the_session(tmp_path: Path) -> None:
    """No git checkout → sandbox_create fails; the rein never starts; teardown still runs."""
    rein = Flaky()
    sandbox = HostSandbox(tmp_path, tmp_path / "agent", RunnerSettings())
    run = await drive(context(), rein, sandbox, Budgets(5))
    assert rein.calls == ["cleanup"]
    assert run.primary is not None
    assert run.primary.stage == "sandbox_create"
    assert run.result.evidence.sandbox_destroy == "succeeded"
    assert run.result.evidence.confinement is None


def _added_lines(patch: Path) -> list[str]:
    lines = patch.read_text().splitlines()
    return [line for line in lines if line.startswith("+") and not line.startswith("+++")]


async def test_the_reference_rein_applies_commits_and_submits(
    project: Any, settings: RunnerSettings
) -> None:
    """The reference fix lands in the diff (committed by the rein) and `submit` is called."""
    workspace: Path = project.workspace
    base = head_commit(workspace)
    rein = resolve_rein("reference", {}, load_scenario(project.scenario_dir), settings)
    sandbox = HostSandbox(workspace, workspace.parent / "agent", settings)
    run = await drive(context("reference"), rein, sandbox, Budgets(60))
    assert run.ok, run.result.evidence.failures
    assert run.dispatch is not None
    assert run.dispatch.exit_code == 0, sandbox.log_path.read_text()
    assert run.result.evidence.confinement == "host-open"
    assert read_sentinel(workspace) is not None
    assert head_commit(workspace) != base
    diff = workspace_diff(workspace, base).splitlines()
    added = _added_lines(project.fix)
    assert added
    assert all(line in diff for line in added)


@pytest.mark.timeout(60)
async def test_host_open_kills_detached_descendants_and_counts_them(
    tiny_repo: Path, tmp_path: Path
) -> None:
    """A host-open agent that `setsid`s a child, and double-forks another that also clears
    its env (so no session marker), then exits: after the session neither lives, the
    survivor count is 0 because they were killed, and the evidence says so."""
    script = (
        "setsid sh -c 'echo $$ > a.pid; sleep 300; :' & "
        "(setsid env -i sh -c 'echo $$ > b.pid; sleep 300; :' &); "
        "until [ -s a.pid ] && [ -s b.pid ]; do :; done; echo detached"
    )
    sandbox = HostSandbox(tiny_repo, tmp_path / "agent", RunnerSettings())
    rein = CommandRein("detach", ("/bin/sh", "-c", script))
    try:
        run = await drive(context(), rein, sandbox, Budgets(30))
        pids = [int((tiny_repo / name).read_text()) for name in ("a.pid", "b.pid")]
        assert all(gone(pid) for pid in pids), "a detached agent process outlived its session"
        evidence = run.result.evidence
        assert evidence.outcome == "succeeded", evidence.failures
        assert evidence.survivors == 0
        assert evidence.reaped is not None
        assert evidence.reaped >= 2
        assert "sh" in evidence.metadata["reaped_processes"]  # type: ignore[operator]
    finally:
        for name in ("a.pid", "b.pid"):
            with contextlib.suppress(OSError, ValueError, psutil.Error):
                psutil.Process(int((tiny_repo / name).read_text())).kill()


@pytest.mark.parametrize(("script", "code"), [("exit 3", 3), ("kill -TERM $$", -15)])
async def test_host_open_keeps_the_agent_commands_exit_status(
    tiny_repo: Path, tmp_path: Path, script: str, code: int
) -> None:
    """The keeper between the runner and the agent passes the exit code (or signal) through."""
    sandbox = HostSandbox(tiny_repo, tmp_path / "agent", RunnerSettings())
    sandbox.create()
    try:
        outcome = await sandbox.run(["/bin/sh", "-c", script], 30)
    finally:
        sandbox.destroy()
    assert outcome.exit_code == code
    assert sandbox.reaped == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("trap", "said"), [("echo got-term; exit 0", "got-term"), ("", None)])
async def test_a_timed_out_host_open_agent_is_stopped_and_its_detached_child_reaped(
    tiny_repo: Path, tmp_path: Path, trap: str, said: str | None
) -> None:
    """On a budget: the agent still gets its SIGTERM (and may exit cleanly), one that ignores
    it is killed, and either way the env-cleared detached child dies with the session."""
    script = (
        f"trap '{trap}' TERM; "
        "(setsid env -i sh -c 'echo $$ > c.pid; sleep 300; :' &); "
        "until [ -s c.pid ]; do :; done; echo started; while :; do sleep 0.1; done"
    )
    settings = RunnerSettings(kill_grace_seconds=2.0)
    sandbox = HostSandbox(tiny_repo, tmp_path / "agent", settings)
    try:
        run = await drive(
            context(), CommandRein("hang", ("/bin/sh", "-c", script)), sandbox, Budgets(3)
        )
        child = int((tiny_repo / "c.pid").read_text())
        assert gone(child), "the detached child outlived the timed-out session"
        evidence = run.result.evidence
        assert evidence.timeout == "total"
        assert evidence.survivors == 0
        assert evidence.reaped is not None
        assert evidence.reaped >= 1
        if said is not None:
            assert said in sandbox.log_path.read_text()
    finally:
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            psutil.Process(int((tiny_repo / "c.pid").read_text())).kill()
