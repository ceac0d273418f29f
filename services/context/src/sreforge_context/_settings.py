"""The context service's settings (env prefix `SREFORGE_CONTEXT_`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import default_use_cases

__all__ = ["ContextSettings"]


class ContextSettings(BaseSettings):
    """Where scenarios live, what the agent is told to run, and where it sees its workspace.

    `agent_workspace_path` is the workspace as the agent sees it; unset, it is the
    host path itself (host sandboxes). A container or bubblewrap sandbox that mounts
    the workspace elsewhere sets it (e.g. `/workspace`).
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_CONTEXT_", frozen=True)

    use_cases_root: Path = Field(default_factory=default_use_cases)
    submit_command: str = Field(default="submit", min_length=1)
    agent_workspace_path: str | None = None
    leak_check: bool = True
