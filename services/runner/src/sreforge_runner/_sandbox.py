"""The `host-open` sandbox: own process group, scrubbed env, fresh HOME, cwd = workspace.

Its directory (`<run_dir>/agent/`) holds the fresh HOME, the bin dir with `submit`
and the agent's output log. HOME and bin are removed on destroy; the log stays for
the record. Nothing here is a security boundary (that is `host-sandboxed`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from sreforge_runner._errors import SandboxError
from sreforge_runner._process import ProcessOutcome, kill_group, run_in_group
from sreforge_runner._settings import RunnerSettings
from sreforge_runner._submit import exclude_sentinel_dir, install_submit

__all__ = ["CONFINEMENT", "HostSandbox"]

CONFINEMENT = "host-open"
_PROCESS_FILE = "process.json"


@dataclass
class HostSandbox:
    """The agent's host-side sandbox for one run."""

    workspace: Path
    root: Path
    settings: RunnerSettings

    @property
    def home(self) -> Path:
        """The agent's fresh HOME."""
        return self.root / "home"

    @property
    def bin_dir(self) -> Path:
        """The bin dir put first on the agent's PATH (holds `submit`)."""
        return self.root / "bin"

    @property
    def log_path(self) -> Path:
        """The agent's stdout and stderr."""
        return self.root / "output.log"

    def create(self) -> None:
        """Make HOME (neutral git identity) and bin, install `submit`, ignore `.sreforge/`."""
        if not (self.workspace / ".git").exists():
            raise SandboxError(f"workspace {self.workspace} is not a git checkout")
        try:
            self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
            install_submit(self.bin_dir, self.workspace)
            exclude_sentinel_dir(self.workspace)
            (self.home / ".gitconfig").write_text(
                f"[user]\n\tname = {self.settings.agent_git_name}\n"
                f"\temail = {self.settings.agent_git_email}\n"
            )
        except OSError as error:
            raise SandboxError(f"sandbox in {self.root}: {error}") from error

    def env(self) -> dict[str, str]:
        """The agent's whole environment: the allowlist, PATH with `submit`, fresh HOME."""
        kept = {k: os.environ[k] for k in self.settings.env_allowlist if k in os.environ}
        return {
            **kept,
            "PATH": f"{self.bin_dir}:{self.settings.agent_path}",
            "HOME": str(self.home),
            "PWD": str(self.workspace),
            "GIT_CONFIG_NOSYSTEM": "1",
        }

    async def run(self, argv: Sequence[str], budget_s: float) -> ProcessOutcome:
        """Run the agent's command in the workspace within `budget_s` wall seconds."""
        return await run_in_group(
            argv,
            cwd=self.workspace,
            env=self.env(),
            budget_s=budget_s,
            log_path=self.log_path,
            grace_s=self.settings.kill_grace_seconds,
            on_start=self._remember,
        )

    def kill_leftovers(self) -> None:
        """Kill the agent's group recorded by an earlier (interrupted) runner, if still ours."""
        try:
            recorded = json.loads((self.root / _PROCESS_FILE).read_text())
            leader = psutil.Process(int(recorded["pgid"]))
            if abs(leader.create_time() - float(recorded["started_at"])) < 1e-3:
                kill_group(int(recorded["pgid"]))
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            return

    def destroy(self) -> None:
        """Remove HOME and the bin dir (the output log stays)."""
        for folder in (self.home, self.bin_dir):
            try:
                shutil.rmtree(folder, ignore_errors=False)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise SandboxError(f"cannot remove {folder}: {error}") from error

    def _remember(self, pgid: int) -> None:
        try:
            started = psutil.Process(pgid).create_time()
        except psutil.Error:
            return
        (self.root / _PROCESS_FILE).write_text(json.dumps({"pgid": pgid, "started_at": started}))
