"""The runner service's exception tree.

RunnerError
├── ProfileError      the agent profile is unknown, invalid, or its script/patch cannot be found
│   └── ProfileRefused  resolution refused the profile (unknown, disabled, blocked)
├── SandboxError      the agent's sandbox (dirs, submit, env) could not be made or removed
├── SessionError      a rein failed to start, drive or end its session
├── DiffError         git could not compute the submission's diff
└── ContaminationFound  the contamination guard saw a harness tell in the agent's sandbox
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sreforge_contracts import HarnessProfile

__all__ = [
    "ContaminationFound",
    "DiffError",
    "ProfileError",
    "ProfileRefused",
    "RunnerError",
    "SandboxError",
    "SessionError",
]


class RunnerError(Exception):
    """Base of every error the runner raises."""


class ProfileError(RunnerError):
    """The run's agent profile does not resolve to a rein."""


class ProfileRefused(ProfileError):
    """Resolution refused the request before any sandbox existed; names why."""

    def __init__(self, message: str, profile: HarnessProfile | None) -> None:
        super().__init__(message)
        self.profile = profile


class SandboxError(RunnerError):
    """The host sandbox could not be created or destroyed."""


class SessionError(RunnerError):
    """A rein could not start, drive or end its session."""


class DiffError(RunnerError):
    """A git command computing the diff failed."""


class ContaminationFound(RunnerError):
    """The agent's sandbox shows a harness tell; the message is the run's abort reason."""
