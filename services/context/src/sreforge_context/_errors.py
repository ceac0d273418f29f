"""The context service's exception tree.

ContextError
├── ScenarioNotFound      the run's scenario has no folder under the use-cases root
├── RunStateMissing       the run state (or its stack) is not in KV yet
├── WorkspaceUnreadable   git could not list the workspace's tree or history
└── SandboxProbeFailed    the probe run inside a sandbox printed no readable view
"""

from __future__ import annotations

__all__ = [
    "ContextError",
    "RunStateMissing",
    "SandboxProbeFailed",
    "ScenarioInvalid",
    "ScenarioNotFound",
    "WorkspaceUnreadable",
]


class ContextError(Exception):
    """Base of every error the context service raises."""


class ScenarioNotFound(ContextError):
    """No scenario folder with the run's scenario id exists."""


class ScenarioInvalid(ContextError):
    """The scenario folder lacks what a brief needs: `trigger.md`, an expected alert."""


class RunStateMissing(ContextError):
    """The run state, its stack or its workspace is not known yet."""


class WorkspaceUnreadable(ContextError):
    """A git command over the agent's workspace failed."""


class SandboxProbeFailed(ContextError):
    """The sandbox probe printed nothing parseable (it did not run, or was cut short)."""
