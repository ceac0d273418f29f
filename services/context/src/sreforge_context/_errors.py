"""The context service's exception tree.

ContextError
├── ScenarioNotFound      the run's scenario has no folder under the use-cases root
├── RunStateMissing       the run state (or its stack) is not in KV yet
└── WorkspaceUnreadable   git could not list the workspace's tree or history

(`SandboxProbeFailed`, re-exported by the package, is the contracts' own: the scanner
lives in `sreforge_contracts` so the runner guards its sandbox with the same code.)
"""

from __future__ import annotations

__all__ = [
    "ContextError",
    "RunStateMissing",
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
