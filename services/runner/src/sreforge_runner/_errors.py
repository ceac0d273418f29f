"""The runner service's exception tree.

RunnerError
├── ProfileError      the agent profile is unknown or its script/patch cannot be found
├── SandboxError      the agent's sandbox (dirs, submit, env) could not be made or removed
├── SessionError      a rein failed to start, drive or end its session
└── DiffError         git could not compute the submission's diff
"""

from __future__ import annotations

__all__ = ["DiffError", "ProfileError", "RunnerError", "SandboxError"]


class RunnerError(Exception):
    """Base of every error the runner raises."""


class ProfileError(RunnerError):
    """The run's agent profile does not resolve to a rein."""


class SandboxError(RunnerError):
    """The host sandbox could not be created or destroyed."""


class DiffError(RunnerError):
    """A git command computing the diff failed."""
