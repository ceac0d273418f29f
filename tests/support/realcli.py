"""A real agent CLI installed for a test (a Python venv): named by an env var, else a skip;
and one session of it, as shipped, through the gateway against a replay model server.

CI installs the CLI and sets the variable to its absolute executable; without it the test
skips and says which variable to set. The install paths bound into the sandbox are the
venv and the base interpreter's prefix its `python` links to (`pyvenv.cfg` `home`), which
is outside the venv for pyenv, uv or a source-built Python.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from replay import Received, ReplayServer, Script
from sreforge_contracts import OperationalReadiness, ResolvedExecutionContext
from sreforge_runner import (
    Budgets,
    CliAgentRein,
    GatewayRun,
    HostSandbox,
    RunnerSettings,
    drive,
    head_commit,
    load_profile,
    workspace_diff,
)

__all__ = ["AGENTS", "RealSession", "VenvCli", "changed_lines", "drive_shipped", "venv_cli"]

AGENTS = Path(__file__).resolve().parents[2] / "agents"
"""The shipped profiles."""


@dataclass(frozen=True)
class VenvCli:
    """The CLI's absolute executable and the host folders it needs inside the sandbox."""

    executable: str
    install_paths: tuple[str, ...]


def venv_cli(variable: str, package: str) -> VenvCli:
    """The CLI `$variable` names (in a venv where `package` is installed), or skip."""
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"${variable} is not set (the executable of a venv with {package})")
    executable = Path(value)
    venv = executable.parent.parent
    config = venv / "pyvenv.cfg"
    if not executable.is_file() or not config.is_file():
        pytest.fail(f"${variable}={value}: not an executable in a venv (no {config})")
    paths = [venv.resolve()]
    for line in config.read_text().splitlines():
        key, _, home = line.partition("=")
        if key.strip() == "home":
            prefix = Path(home.strip()).resolve().parent
            if not prefix.is_relative_to("/usr") and prefix not in paths:
                paths.append(prefix)
    return VenvCli(str(executable), tuple(str(path) for path in paths))


@dataclass(frozen=True)
class RealSession:
    """What one session of a real CLI left: the gateway's run, its sandbox's record
    (`box.root`), the hand-off commit, the model calls the replay served, and the time."""

    run: GatewayRun
    box: HostSandbox
    base: str
    calls: list[Received]
    session_s: float

    @property
    def log(self) -> str:
        """The agent's output (stdout and stderr)."""
        return self.box.log_path.read_text()

    def diff(self) -> str:
        """The submission's diff: the working tree against the hand-off commit."""
        return workspace_diff(self.box.workspace, self.base)


async def drive_shipped(
    preset: str,
    cli: VenvCli,
    script: Script,
    model: str,
    workspace: Path,
    settings: RunnerSettings,
    page: str,
) -> RealSession:
    """Run the shipped `agents/<preset>.toml` with the real CLI (its executable and install
    paths swapped in, `model` set) in bubblewrap, its proxy pointed at a replay of `script`."""
    shipped = load_profile(AGENTS / f"{preset}.toml")
    assert shipped.command is not None
    command = shipped.command.model_copy(
        update={"executable": cli.executable, "install_paths": cli.install_paths}
    )
    box = HostSandbox(
        workspace,
        workspace.parent / "agent",
        settings,
        kind="host-sandboxed",
        install_paths=cli.install_paths,
    )
    base = head_commit(workspace)
    with ReplayServer(script, model=model) as server:
        profile = shipped.model_copy(
            update={
                "model": model,
                "command": command,
                "metadata": {**shipped.metadata, "upstream": f"{server.url}/v1"},
            }
        )
        context = ResolvedExecutionContext(
            request_id=f"run-real-{preset}",
            profile=profile,
            readiness=OperationalReadiness(state="unverified"),
            proof_run=True,
        )
        started = time.monotonic()
        run = await drive(context, CliAgentRein(profile, page), box, Budgets(240, 120, 120))
        session_s = time.monotonic() - started
        calls = server.calls()
    return RealSession(run, box, base, calls, session_s)


def changed_lines(diff: str) -> list[str]:
    """A diff's added and removed lines, without the file headers."""
    return [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    ]
