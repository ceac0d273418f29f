"""Run git with a clean environment; one error tree (`GitError`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GitError", "GitFailed", "GitResult", "git", "git_env", "run_git"]

DEFAULT_TIMEOUT_S = 60.0


class GitError(Exception):
    """git could not be run in a folder (missing binary, timeout, or a failed command)."""


class GitFailed(GitError):
    """A checked git command exited non-zero."""

    def __init__(self, message: str, result: GitResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, slots=True)
class GitResult:
    """One git invocation: its exit code and decoded output."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when git exited 0."""
        return self.returncode == 0


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process env minus every `GIT_*`, with global and system config shut out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_PAGER="cat")
    env.update(extra or {})
    return env


def run_git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> GitResult:
    """Run `git [-c k=v…] args` in `cwd`; `GitError` only when git could not run at all."""
    settings = [part for key, value in (config or {}).items() for part in ("-c", f"{key}={value}")]
    try:
        done = subprocess.run(
            ["git", *settings, *args],
            cwd=cwd,
            env=git_env(env),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as error:
        raise GitError(f"git {_name(args)} in {cwd}: no answer within {timeout_s:g} s") from error
    except OSError as error:
        raise GitError(f"git {_name(args)} in {cwd}: {error.strerror or error}") from error
    return GitResult(
        args=tuple(args),
        returncode=done.returncode,
        stdout=done.stdout.decode(errors="replace"),
        stderr=done.stderr.decode(errors="replace"),
    )


def git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> str:
    """`run_git`, checked: its stdout, or `GitFailed` naming the command, folder and stderr."""
    result = run_git(cwd, *args, env=env, config=config, timeout_s=timeout_s)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip() or "no message"
        raise GitFailed(
            f"git {_name(args)} in {cwd} failed (exit {result.returncode}): {detail}", result
        )
    return result.stdout


def _name(args: tuple[str, ...]) -> str:
    return args[0] if args else "(no command)"
