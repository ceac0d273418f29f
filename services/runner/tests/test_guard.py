"""The contamination guard over the agent's own sandbox, run by the gateway before dispatch.

Played as a leak would happen: the runner's side (a profile's env, an install path)
puts a harness tell where the confined agent could read it. The run must stop before
the agent starts, naming the tell and the surface but no value; a clean sandbox
passes and the agent runs. The probe's output never reaches the agent's log or
transcript.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import (
    CommandSpec,
    HarnessProfile,
    OperationalReadiness,
    ProfileLimits,
    ResolvedExecutionContext,
    Tells,
)
from sreforge_runner import (
    Budgets,
    CliAgentRein,
    GatewayRun,
    HostSandbox,
    RunnerSettings,
    SandboxError,
    drive,
    probe_sandbox,
    read_sentinel,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

FAKE_AGENT = Path(__file__).parent / "fixtures" / "fake-agent"
PAGE = "# Checkout latency is high\n\nEdit file: cache_settings.py\n"
PROBE_MARK = "sandbox-view:"
PREFIX = "contamination guard: harness tells visible to the agent: "


def _install(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(FAKE_AGENT, folder / "fake-agent")
    return folder


def _profile(install: Path, env: dict[str, str] | None = None) -> HarnessProfile:
    return HarnessProfile(
        name="fake-cli",
        rein="command",
        sandbox="host-sandboxed",
        limits=ProfileLimits(session_start_s=30, idle_s=30, total_s=60),
        command=CommandSpec(
            preset="custom",
            executable=str(install / "fake-agent"),
            args=("--prompt-file", "{prompt_file}"),
            install_paths=(str(install),),
            env=env or {},
        ),
    )


async def _drive(
    project: Any, settings: RunnerSettings, profile: HarnessProfile
) -> tuple[GatewayRun, HostSandbox]:
    assert profile.command is not None
    sandbox = HostSandbox(
        project.workspace,
        project.workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        install_paths=profile.command.install_paths,
    )
    context = ResolvedExecutionContext(
        request_id="run-guarded",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    tells = Tells.for_run(project.scenario_id, "CheckoutLatencyHigh")
    run = await drive(context, CliAgentRein(profile, PAGE), sandbox, Budgets(60, 30, 30), tells)
    return run, sandbox


def _agent_saw(sandbox: HostSandbox) -> str:
    """Everything kept of the agent's output (log and stamped transcript)."""
    kept = (sandbox.log_path, sandbox.transcript_path)
    return "".join(path.read_text() for path in kept if path.exists())


def _assert_stopped_before_the_agent(run: GatewayRun, sandbox: HostSandbox, project: Any) -> None:
    assert run.dispatch is None, "the agent was dispatched"
    assert run.primary is not None
    assert run.primary.stage == "session_start"
    assert run.primary.error == f"ContaminationFound: {run.guard_hit}"
    assert read_sentinel(project.workspace) is None
    assert "fake-agent" not in _agent_saw(sandbox), "the agent ran"
    assert PROBE_MARK not in _agent_saw(sandbox), "the probe's output reached the agent's log"
    evidence = run.result.evidence
    assert (evidence.sandbox_destroy, evidence.survivors) == ("succeeded", 0)


async def test_a_profile_env_value_naming_the_rig_aborts_before_the_agent_starts(
    project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """A profile env value with the harness's name in it: the guard names the variable
    and the word, never the value (which may be secret-ish)."""
    install = _install(tmp_path / "tools")
    env = {"TOOLS_HOME": "/opt/sreforge/tools-s3cr3t", "EDITOR": "true"}
    run, sandbox = await _drive(project, settings, _profile(install, env))
    assert run.guard_hit == f"{PREFIX}harness word 'sreforge' in sandbox env TOOLS_HOME"
    _assert_stopped_before_the_agent(run, sandbox, project)
    assert "s3cr3t" not in run.result.model_dump_json()


async def test_an_install_path_carrying_the_run_id_of_the_case_aborts(
    project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """An install folder named after the scenario is bound into the sandbox at its host
    path, so bubblewrap's own command line (pid 1's title) shows it to the agent."""
    install = _install(tmp_path / f"{project.scenario_id}-tools")
    run, sandbox = await _drive(project, settings, _profile(install))
    assert run.guard_hit is not None
    assert run.guard_hit.startswith(PREFIX)
    assert "scenario id in sandbox process titles" in run.guard_hit
    _assert_stopped_before_the_agent(run, sandbox, project)


async def test_a_clean_sandbox_passes_the_guard_and_the_agent_runs(
    project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """The layout the runner makes (relay, `.gitconfig`, `submit`, the page in HOME, an
    ordinary profile env) has no tell: the agent runs and submits as without the guard,
    and its log holds its own output only."""
    install = _install(tmp_path / "tools")
    run, sandbox = await _drive(project, settings, _profile(install, {"EDITOR": "true"}))
    assert run.ok, (run.result.evidence, _agent_saw(sandbox))
    assert run.guard_hit is None
    assert read_sentinel(project.workspace) is not None
    assert "fake-agent: stdin closed" in _agent_saw(sandbox)
    assert PROBE_MARK not in _agent_saw(sandbox)


async def test_the_probe_refuses_an_unconfined_sandbox(
    project: Any, settings: RunnerSettings
) -> None:
    """host-open has no inside to probe (the agent sees the host): no silent 'clean'."""
    sandbox = HostSandbox(project.workspace, project.workspace.parent / "agent", settings)
    sandbox.create()
    try:
        with pytest.raises(SandboxError, match="not confined"):
            await probe_sandbox(sandbox)
    finally:
        sandbox.destroy()
