"""How an installed tool looks inside the sandbox: at its neutral place, its links followed.

An engine-home install (whose path names the harness) is shown at `/opt/agent/<preset>`
(`mount_at`); the host path does not exist inside. A venv whose `python` links outside
what the sandbox shows is named before bwrap can only say `execvp: No such file`.
A preset without `--version` is probed its own way, and the evidence says how.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sreforge_contracts import CommandSpec, HarnessProfile
from sreforge_runner import Budgets, HostSandbox, RunnerSettings, SandboxError, check_profile
from sreforge_runner._bwrap import outside_the_view, shown_at

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def _tool(folder: Path, body: str) -> Path:
    script = folder / "bin" / "tool"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def _profile(tool: Path, folder: Path, preset: str = "custom", **command: object) -> HarnessProfile:
    return HarnessProfile(
        name="tool",
        rein="command",
        sandbox="host-sandboxed",
        command=CommandSpec(
            preset=preset, executable=str(tool), install_paths=(str(folder),), **command
        ),
    )


def _git_init(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)


def _settings(tmp_path: Path) -> RunnerSettings:
    return RunnerSettings(readiness_dir=tmp_path / "readiness", agents_dir=tmp_path)


def test_a_mapped_path_is_shown_at_its_inside_place() -> None:
    """Only paths under a mapped folder move; the rest stay where they are."""
    places = {"/h/sreforge/tools/x/1": "/opt/agent/x"}
    assert shown_at("/h/sreforge/tools/x/1/bin/x", places) == "/opt/agent/x/bin/x"
    assert shown_at("/h/sreforge/tools/x/10/bin/x", places) == "/h/sreforge/tools/x/10/bin/x"
    assert shown_at("claude", places) == "claude"


def test_mount_at_must_name_one_of_the_install_paths() -> None:
    """A place for a folder that is not mounted at all is a profile error."""
    with pytest.raises(ValueError, match="not one of install_paths"):
        CommandSpec(preset="custom", install_paths=("/a",), mount_at={"/b": "/opt/agent/b"})


@needs_bwrap
def test_an_installed_tool_runs_at_its_neutral_place_and_the_home_path_is_absent(
    tmp_path: Path,
) -> None:
    """The probe starts the tool as the agent does: its `$0` is the neutral place and the
    engine home's path (it names the harness) does not exist inside."""
    folder = tmp_path / "sreforge" / "tools" / "tool" / "1.0"
    tool = _tool(folder, f'[ -e "{folder}" ] && where=visible || where=absent\necho "$0 $where"\n')
    profile = _profile(tool, folder, mount_at={str(folder): "/opt/agent/tool"})
    record = check_profile(profile, _settings(tmp_path))
    assert record.readiness.state == "ready", record
    assert record.checks[-1].first_line == "/opt/agent/tool/bin/tool absent"
    assert record.checks[-1].argv == ("/opt/agent/tool/bin/tool", "--version")


@needs_bwrap
async def test_the_agent_sandbox_starts_the_executable_at_its_neutral_place(
    tmp_path: Path,
) -> None:
    """A session's argv names the host path; the confined agent runs the inside one."""
    folder = tmp_path / "sreforge" / "tools" / "tool" / "1.0"
    tool = _tool(folder, 'echo "started as $0"\n')
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _git_init(workspace)
    sandbox = HostSandbox(
        workspace,
        tmp_path / "agent",
        _settings(tmp_path),
        kind="host-sandboxed",
        install_paths=(str(folder),),
        mount_at={str(folder): "/opt/agent/tool"},
    )
    sandbox.create()
    try:
        outcome = await sandbox.run([str(tool)], Budgets(30, 30, 30))
    finally:
        sandbox.destroy()
    assert outcome.exit_code == 0
    assert "started as /opt/agent/tool/bin/tool" in sandbox.log_path.read_text()


def _venv(folder: Path, python_target: str) -> Path:
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /elsewhere/bin\n")
    (folder / "bin" / "python").symlink_to(python_target)
    return _tool(folder, 'exec "$(dirname -- "$0")/python" -c "print(1)"\n')


def test_a_venv_python_linking_outside_the_view_is_named(tmp_path: Path) -> None:
    """The link and where it leads are named, with what to do about it."""
    folder = tmp_path / "venv"
    tool = _venv(folder, "/root/.pyenv/versions/3.11.7/bin/python3.11")
    why = outside_the_view(str(tool), (str(folder),))
    assert why is not None
    assert "/root/.pyenv/versions/3.11.7/bin/python3.11" in why
    assert f"via {folder}/bin/python" in why
    assert "install_paths" in why
    assert (
        outside_the_view(str(_venv(tmp_path / "ok", "/usr/bin/python3")), (str(tmp_path),)) is None
    )


@needs_bwrap
async def test_a_session_and_a_check_refuse_the_venv_naming_the_missing_interpreter(
    tmp_path: Path,
) -> None:
    """`check` stores blocked evidence naming the link, and so does a session's start:
    never bwrap's bare `execvp ...: No such file or directory`."""
    folder = tmp_path / "venv"
    tool = _venv(folder, "/opt/nowhere/python3")
    record = check_profile(_profile(tool, folder), _settings(tmp_path))
    assert record.readiness.state == "blocked"
    assert "/opt/nowhere/python3" in (record.readiness.evidence or "")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    _git_init(workspace)
    sandbox = HostSandbox(
        workspace,
        tmp_path / "agent",
        _settings(tmp_path),
        kind="host-sandboxed",
        install_paths=(str(folder),),
    )
    sandbox.create()
    try:
        with pytest.raises(SandboxError, match="/opt/nowhere/python3"):
            await sandbox.run([str(tool)], Budgets(30, 30, 30))
    finally:
        sandbox.destroy()


@needs_bwrap
def test_mini_swe_agent_is_probed_with_help_and_the_evidence_says_so(tmp_path: Path) -> None:
    """mini-swe-agent has no `--version` (exit 2 after its banner): its probe is `--help`,
    and a banner before a failing exit never reads as ready."""
    folder = tmp_path / "mini"
    body = 'echo "This is mini-swe-agent version 9.9."\n[ "$1" = --help ] || exit 2\n'
    tool = _tool(folder, body)
    record = check_profile(_profile(tool, folder, preset="mini-swe-agent"), _settings(tmp_path))
    assert record.readiness.state == "ready", record
    assert record.checks[-1].argv == (str(tool), "--help")
    assert record.readiness.evidence is not None
    assert record.readiness.evidence.endswith(
        f"`{tool} --help` exited 0: This is mini-swe-agent version 9.9."
    )
    custom = check_profile(_profile(tool, folder), _settings(tmp_path))
    assert custom.readiness.state == "blocked"
    assert f"`{tool} --version` exited 2" in (custom.readiness.evidence or "")
