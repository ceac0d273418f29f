"""The deployer's settings (env prefix `SREFORGE_DEPLOYER_`)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DeployerSettings", "default_runs_root"]


def default_runs_root() -> Path:
    """`$XDG_RUNTIME_DIR/sreforge-stacks` if that is set, else `<tmp>/sreforge-stacks`."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(tempfile.gettempdir())
    return base / "sreforge-stacks"


class DeployerSettings(BaseSettings):
    """Where stacks live, which ports they may use, which binaries they run."""

    model_config = SettingsConfigDict(env_prefix="SREFORGE_DEPLOYER_", frozen=True)

    runs_root: Path = Field(default_factory=default_runs_root)
    port_lock_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "sreforge-ports"
    )
    port_range_low: int = Field(default=20000, ge=1024)
    port_range_high: int = Field(default=32000, le=65536)
    prometheus_bin: str = "prometheus"
    alertmanager_bin: str = "prometheus-alertmanager"
    python: str = sys.executable
    observability_timeout_seconds: float = Field(default=30.0, gt=0)
    scrape_timeout_seconds: float = Field(default=30.0, gt=0)
    stop_timeout_seconds: float = Field(default=10.0, gt=0)
