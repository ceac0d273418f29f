"""What the gateway and the reins need of a sandbox, whichever kind it is.

`HostSandbox` (`host-open`, `host-sandboxed`) and `RemoteSandbox` (`remote`) both
offer it. Paths are host paths: the workspace, HOME, the logs and the transcript
live on the runner's host (a remote sandbox syncs them around each `run`);
`inside` says how a host path looks to the agent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from sreforge_contracts import SandboxKind
from sreforge_git import GitError, git

from sreforge_runner._errors import SandboxError
from sreforge_runner._process import Budgets, ProcessOutcome
from sreforge_runner._settings import RunnerSettings

__all__ = ["SESSION_MARKER", "AgentSandbox", "SessionLayout", "agent_env", "write_git_identity"]

SESSION_MARKER = "AGENT_SESSION"
"""An env var set for every agent process: how survivors are found after teardown."""


def agent_env(
    settings: RunnerSettings,
    *,
    bin_dir: Path,
    home: Path,
    workspace: Path,
    marker: str,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The agent's whole environment, with paths as the agent sees them: the allowlist,
    `extra`, PATH with `submit` first, the fresh HOME, the session marker."""
    kept = {k: os.environ[k] for k in settings.env_allowlist if k in os.environ}
    return {
        **kept,
        **(extra or {}),
        "PATH": f"{bin_dir}:{settings.agent_path}",
        "HOME": str(home),
        "PWD": str(workspace),
        "GIT_CONFIG_NOSYSTEM": "1",
        SESSION_MARKER: marker,
    }


def write_git_identity(settings: RunnerSettings, home: Path, workspace: Path) -> None:
    """The agent's neutral git identity, in `$HOME/.gitconfig` and in the workspace's own
    `.git/config` (outside the diff): a CLI that runs its shell with
    `GIT_CONFIG_GLOBAL=/dev/null` (gemini-cli) or strips `GIT_AUTHOR_*` from its env
    still commits under it."""
    name, email = settings.agent_git_name, settings.agent_git_email
    (home / ".gitconfig").write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
    try:
        git(workspace, "config", "--local", "user.name", name)
        git(workspace, "config", "--local", "user.email", email)
    except GitError as error:
        raise SandboxError(f"workspace {workspace}: {error}") from error


class SessionLayout:
    """The host side of one session under `root` (`<run_dir>/agent/`), for every kind.

    HOME and bin go on destroy; the output log and the stamped transcript stay for
    the record.
    """

    root: Path

    @property
    def home(self) -> Path:
        """The agent's fresh HOME (host side)."""
        return self.root / "home"

    @property
    def bin_dir(self) -> Path:
        """The bin dir put first on the agent's PATH (holds `submit`)."""
        return self.root / "bin"

    @property
    def log_path(self) -> Path:
        """The agent's stdout and stderr."""
        return self.root / "output.log"

    @property
    def transcript_path(self) -> Path:
        """The agent's output lines as JSONL, each stamped with the harness clock."""
        return self.root / "stream.jsonl"

    @property
    def session_dir(self) -> Path:
        """The session's files (the page, native transcripts), inside HOME."""
        return self.home / "session"


class AgentSandbox(Protocol):
    """One run's sandbox: made by `create`, used by a rein, removed by `destroy`."""

    workspace: Path
    root: Path
    settings: RunnerSettings
    kind: SandboxKind
    confinement: SandboxKind | None
    downgrade: str | None
    reaped: list[str] | None
    """Names of detached processes killed when a command ended; None when not tracked."""

    @property
    def home(self) -> Path:
        """The agent's fresh HOME (host side)."""
        ...

    @property
    def bin_dir(self) -> Path:
        """The bin dir first on the agent's PATH (holds `submit`)."""
        ...

    @property
    def log_path(self) -> Path:
        """The agent's raw stdout and stderr."""
        ...

    @property
    def transcript_path(self) -> Path:
        """The agent's output lines as JSONL, stamped with the harness clock."""
        ...

    @property
    def session_dir(self) -> Path:
        """The session's files (the page, native transcripts), inside HOME."""
        ...

    @property
    def confined(self) -> bool:
        """True when the agent sees other paths than the host's (`inside` maps them)."""
        ...

    def inside(self, host_path: Path) -> Path:
        """How a host path under the workspace or HOME looks to the agent."""
        ...

    def allow_endpoint(self, url: str) -> None:
        """Let the agent reach a loopback `url` of the runner (or refuse, naming it)."""
        ...

    def network_metadata(self) -> dict[str, object]:
        """What the agent's network was, for the evidence's metadata."""
        ...

    def create(self) -> None:
        """Make the sandbox; `SandboxError` says why it cannot be made."""
        ...

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The agent's whole environment."""
        ...

    async def run(
        self,
        argv: Sequence[str],
        budget_s: float | Budgets,
        extra_env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> ProcessOutcome:
        """Run a command of the agent in the workspace within its budgets (stdin closed)."""
        ...

    def survivors(self) -> list[int]:
        """Pids of the session's processes still alive (should be none)."""
        ...

    def settled_survivors(self, within_s: float = 3.0) -> list[int]:
        """Survivors still alive after giving killed processes `within_s` to unwind."""
        ...

    def kill_leftovers(self) -> None:
        """Kill what an earlier, interrupted runner left running for this session."""
        ...

    def destroy(self) -> None:
        """Kill any survivor and remove what `create` made (the logs stay)."""
        ...
