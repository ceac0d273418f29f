"""The runner's settings (env prefix `SREFORGE_RUNNER_`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import default_use_cases

__all__ = [
    "RunnerSettings",
    "default_agents_dir",
    "default_readiness_dir",
]


def _checkout() -> Path:
    return Path(__file__).resolve().parents[4]


def default_agents_dir() -> Path:
    """`SREFORGE_AGENTS` if set, else the `agents/` catalog of this checkout."""
    configured = os.environ.get("SREFORGE_AGENTS")
    return Path(configured) if configured else _checkout() / "agents"


def default_readiness_dir() -> Path:
    """Where `sreforge agents check` stores probe evidence: `<engine home>/agents`."""
    home = os.environ.get("SREFORGE_HOME")
    base = Path(home) if home else Path.home() / ".local" / "state" / "sreforge"
    return base / "agents"


class RunnerSettings(BaseSettings):
    """Budgets, the agent's environment allowlist and where scripts are found.

    Budgets are wall seconds and never scaled by the run's time scale. A run label
    `budget_seconds` overrides the budget for that run.
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_RUNNER_", frozen=True)

    use_cases_root: Path = Field(default_factory=default_use_cases)
    agents_dir: Path = Field(default_factory=default_agents_dir)
    readiness_dir: Path = Field(default_factory=default_readiness_dir)
    bwrap_path: str = "bwrap"
    docker_path: str = "docker"
    in_box: bool = True
    """On the compose topology, whether a profile with `in_box = true` runs in a container
    on the run's agent network (`in-box`); off, every agent runs host-side in its
    profile's `sandbox` (with the stack's published loopback endpoints)."""
    box_base_image: str = "local/bookworm"
    """The local image the box image is built on (no registry is reachable)."""
    box_lock_dir: Path = Field(default_factory=lambda: Path(tempfile.gettempdir()) / "sreforge-box")
    """Where the box image's build lock lives (one build across runners)."""
    scripts_dir: Path | None = None
    agent_budget_seconds: float = Field(default=600.0, gt=0)
    rein_budget_seconds: float = Field(default=120.0, gt=0)
    kill_grace_seconds: float = Field(default=2.0, ge=0)
    agent_path: str = "/usr/local/bin:/usr/bin:/bin"
    env_allowlist: tuple[str, ...] = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "USER", "LOGNAME")
    agent_git_name: str = "On-call Engineer"
    agent_git_email: str = "oncall@example.com"
    max_rca_bytes: int = Field(default=256_000, gt=0)
    installed_profiles: bool = Field(default_factory=lambda: not os.environ.get("SREFORGE_AGENTS"))
    """Whether the profiles `sreforge agents install` wrote (`<readiness_dir>/<name>.toml`)
    overlay the catalog's of the same name: on unless `SREFORGE_AGENTS` names the whole
    catalog."""

    @property
    def installed_dir(self) -> Path | None:
        """The folder of installed profiles that overlays the catalog, when on."""
        return self.readiness_dir if self.installed_profiles else None
