"""Reins: what drives the agent's session (SPEC §8). The first ones: noop, reference, scripted.

A rein starts a session in a sandbox, dispatches the agent until it exits or its
budget runs out, ends the session and cleans it up. `resolve_rein` turns a run's
agent profile (and labels) into a rein:

- `noop`: does nothing and never submits (the baseline that must fail);
- `reference`: applies the scenario's held-out `solution/fix.patch`, commits, submits;
- `scripted`: runs a file of shell commands in the workspace; the file comes from the
  run label `script`, or `scripted:<name>` finds `<name>`, `<name>.patch` or
  `<name>.sh` in the scenario's `verify/negative/` or the configured scripts dir.
  A `.patch` file is applied like the reference fix.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sreforge_contracts import Scenario, TimeoutKind

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._errors import ProfileError
from sreforge_runner._process import Budgets, ProcessOutcome
from sreforge_runner._settings import RunnerSettings

__all__ = [
    "CommandRein",
    "Dispatch",
    "NoopRein",
    "Rein",
    "patch_rein",
    "resolve_rein",
    "script_rein",
]

# Applied as the agent would: in the workspace, committed under the agent's identity.
_APPLY_AND_SUBMIT = 'git apply --index "$1" && git commit -q -m "Apply fix" && submit'
_SCRIPT_SUFFIXES = ("", ".patch", ".sh")


@dataclass(frozen=True)
class Dispatch:
    """How the agent's session ended: exit code, why it stopped, which timeout fired."""

    stop_reason: str
    duration_ms: float
    exit_code: int | None = None
    timeout: TimeoutKind | None = None

    @classmethod
    def of(cls, outcome: ProcessOutcome, started: float) -> Dispatch:
        """The dispatch of an agent process that ran from `started` (monotonic) to `outcome`."""
        return cls(
            stop_reason=f"timeout:{outcome.timeout}" if outcome.timeout else "exited",
            duration_ms=(time.monotonic() - started) * 1000,
            exit_code=outcome.exit_code,
            timeout=outcome.timeout,
        )


class Rein(Protocol):
    """The gateway's handle on one kind of agent."""

    @property
    def name(self) -> str:
        """The rein's name, as recorded in the evidence."""
        ...

    @property
    def session_env(self) -> Mapping[str, str]:
        """What the rein adds to the agent's env (known once the session has started):
        the contamination guard probes the sandbox with it."""
        ...

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Prepare the agent's session inside a created sandbox."""

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run the agent until it exits or one of its budgets fires."""
        ...

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Close the session (collect what the agent left)."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Release the session's resources; always called, even after a failure."""


@dataclass(frozen=True)
class NoopRein:
    """The baseline: starts nothing, changes nothing, never submits."""

    name: str = "noop"

    @property
    def session_env(self) -> Mapping[str, str]:
        """Nothing: no agent process runs."""
        return {}

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to start."""

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Return at once: the agent did nothing."""
        return Dispatch(stop_reason="no_action", duration_ms=0.0)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to end."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing to clean up."""


@dataclass(frozen=True)
class CommandRein:
    """An agent that is one command run in the sandbox (a script, a patch applier)."""

    name: str
    argv: tuple[str, ...]

    @property
    def session_env(self) -> Mapping[str, str]:
        """Nothing beyond the sandbox's own env."""
        return {}

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """Nothing beyond the sandbox: the command is the session."""

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Run the command to its end or the total budget (a harness script may be quiet)."""
        started = time.monotonic()
        outcome = await sandbox.run(self.argv, Budgets(total_s=budgets.total_s))
        return Dispatch.of(outcome, started)

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """The process group is already gone when dispatch returns."""

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Nothing held beyond the sandbox."""


def patch_rein(name: str, patch: Path) -> CommandRein:
    """A rein that `git apply`s `patch` in the workspace, commits it and runs `submit`."""
    return CommandRein(name, ("/bin/sh", "-c", _APPLY_AND_SUBMIT, "apply", str(patch.resolve())))


def script_rein(name: str, script: Path) -> CommandRein:
    """A rein that runs `script` (shell commands) with `sh -e` in the workspace."""
    if script.suffix == ".patch":
        return patch_rein(name, script)
    return CommandRein(name, ("/bin/sh", "-e", str(script.resolve())))


def resolve_rein(
    profile: str,
    labels: Mapping[str, str],
    scenario: Scenario | None,
    settings: RunnerSettings,
) -> CommandRein | NoopRein:
    """The rein for an agent profile; `ProfileError` names what could not be found."""
    if profile == "noop":
        return NoopRein()
    if profile == "reference":
        fix = _require_scenario(profile, scenario).solution_dir / "fix.patch"
        if not fix.is_file():
            raise ProfileError(f"agent reference: {fix} does not exist")
        return patch_rein(profile, fix)
    if profile == "scripted":
        return script_rein(profile, _labelled_script(labels, scenario))
    if profile.startswith("scripted:"):
        name = profile.removeprefix("scripted:")
        return script_rein(profile, _named_script(name, scenario, settings))
    raise ProfileError(f"agent {profile!r}: unknown profile (noop, reference, scripted[:name])")


def _require_scenario(profile: str, scenario: Scenario | None) -> Scenario:
    if scenario is None:
        raise ProfileError(f"agent {profile}: the run's scenario folder was not found")
    return scenario


def _labelled_script(labels: Mapping[str, str], scenario: Scenario | None) -> Path:
    raw = labels.get("script")
    if not raw:
        raise ProfileError("agent scripted: the run has no `script` label naming its file")
    path = Path(raw)
    if not path.is_absolute() and scenario is not None:
        path = scenario.path / path
    if not path.is_file():
        raise ProfileError(f"agent scripted: script {path} does not exist")
    return path


def _named_script(name: str, scenario: Scenario | None, settings: RunnerSettings) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ProfileError(f"agent scripted:{name}: a script name is a plain file name")
    folders: Sequence[Path] = [
        *([scenario.negative_dir] if scenario else []),
        *([settings.scripts_dir] if settings.scripts_dir else []),
    ]
    for folder in folders:
        for suffix in _SCRIPT_SUFFIXES:
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    searched = ", ".join(str(folder) for folder in folders) or "no folders"
    raise ProfileError(f"agent scripted:{name}: no {name}[.patch|.sh] in {searched}")
