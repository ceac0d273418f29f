"""The correlator's settings, read from `SREFORGE_CORRELATOR_*` environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sreforge_contracts import BUILTIN_AGENTS, default_use_cases

__all__ = [
    "CorrelatorSettings",
    "default_agents_dir",
    "default_scripts_dir",
]


def default_agents_dir() -> Path:
    """`SREFORGE_AGENTS` (as the runner reads it), else the `agents/` catalog of this checkout."""
    configured = os.environ.get("SREFORGE_AGENTS")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[4] / "agents"


def default_scripts_dir() -> Path | None:
    """`SREFORGE_RUNNER_SCRIPTS_DIR` (as the runner reads it), else None."""
    configured = os.environ.get("SREFORGE_RUNNER_SCRIPTS_DIR")
    return Path(configured) if configured else None


class CorrelatorSettings(BaseSettings):
    """Where scenarios live, which agents are known, and the correlator's clocks."""

    model_config = SettingsConfigDict(env_prefix="SREFORGE_CORRELATOR_", extra="ignore")

    use_cases: Path = Field(default_factory=default_use_cases)
    """The root holding `<use-case>/scenarios/<id>/scenario.toml`."""
    agents: Annotated[tuple[str, ...], NoDecode] = ()
    """Agent profiles known besides the built-in ones (comma-separated in the env)."""
    agents_dir: Path = Field(default_factory=default_agents_dir)
    """The profile catalog: every `<name>.toml` in it is a known agent."""
    scripts_dir: Path | None = Field(default_factory=default_scripts_dir)
    """The runner's extra folder for `scripted:<name>` (besides the scenario's negatives)."""
    agent_budget_seconds: float = Field(default=1800.0, gt=0)
    """The agent's wall-clock budget, recorded as the run's agent deadline (never scaled)."""
    correlation_window_seconds: float = Field(default=60.0, gt=0)
    """Signals firing this close to the trigger are attached to it (at time_scale 1)."""
    confirm_fire_grace_seconds: float = Field(default=6.0, ge=0)
    """How long past the confirm-fire deadline the sweep waits before failing a run:
    a TriggerFired redelivered after a crash (within the triggers consumer's 5 s ack
    wait) still lands first. Not scaled: redelivery takes wall time at any scale."""
    sweep_interval_seconds: float = Field(default=0.5, gt=0)
    """How often run deadlines are checked."""
    announce_window_seconds: float = Field(default=60.0, gt=0)
    """How long after a transition the sweep re-publishes its event (crash recovery)."""

    @field_validator("agents", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @property
    def known_agents(self) -> frozenset[str]:
        """Built-in profiles, the catalog's profiles and the configured ones."""
        catalog = (path.stem for path in self.agents_dir.glob("*.toml"))
        return frozenset((*BUILTIN_AGENTS, *catalog, *self.agents))
