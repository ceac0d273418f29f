"""The deployer's settings (env prefix `SREFORGE_DEPLOYER_`)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts import default_use_cases

__all__ = [
    "DeployerSettings",
    "default_compose_wheels",
    "default_engine_home",
    "default_runs_root",
]


def default_runs_root() -> Path:
    """`$XDG_RUNTIME_DIR/stacks` if that is set, else `<tmp>/stacks`.

    The name is neutral on purpose: the agent sees its workspace path under it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(tempfile.gettempdir())
    return base / "stacks"


def default_engine_home() -> Path:
    """`SREFORGE_HOME` (as the engine reads it), else `~/.local/state/sreforge`."""
    configured = os.environ.get("SREFORGE_HOME")
    if configured:
        return Path(configured)
    return Path.home() / ".local" / "state" / "sreforge"


def default_compose_wheels() -> Path:
    """`.sreforge/compose/wheels` of this checkout (`scripts/compose-context` fills it)."""
    return Path(__file__).resolve().parents[4] / ".sreforge" / "compose" / "wheels"


class DeployerSettings(BaseSettings):
    """Where stacks live, which ports they may use, which binaries they run, CI limits.

    `alert_webhook_base` is where every stack's Alertmanager posts (the run's opaque
    route is appended); `alert_token_file` holds the bearer token it presents (the
    trigger's token file). Without a base, pages go nowhere.
    `observability_gogc`/`observability_gomemlimit` become the run's Prometheus and
    Alertmanager's GOGC/GOMEMLIMIT: their heaps are small and short-lived, so a
    tighter GC target trims the stack's peak memory (measured by `bench/stack_boot.py`).
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_DEPLOYER_", frozen=True)

    runs_root: Path = Field(default_factory=default_runs_root)
    engine_home: Path = Field(default_factory=default_engine_home)
    """The engine home recorded in each stack record (the runs root is shared by homes)."""
    port_lock_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "sreforge-ports"
    )
    port_range_low: int = Field(default=20000, ge=1024)
    port_range_high: int = Field(default=32000, le=65536)
    prometheus_bin: str = "prometheus"
    postgres_bin_dir: Path | None = None
    """Where `initdb` and `postgres` are, for a run on PostgreSQL (`DATABASE=postgres`);
    unset: the ones on PATH, else the newest `/usr/lib/postgresql/*/bin`."""
    alertmanager_bin: str = "prometheus-alertmanager"
    python: str = sys.executable
    observability_timeout_seconds: float = Field(default=30.0, gt=0)
    scrape_timeout_seconds: float = Field(default=30.0, gt=0)
    stop_timeout_seconds: float = Field(default=10.0, gt=0)
    use_cases: Path = Field(default_factory=default_use_cases)
    alert_webhook_base: str | None = None
    alert_token_file: Path | None = None
    ci_timeout_seconds: float = Field(default=300.0, gt=0)
    # Agent-controlled code (CI's tests, the deployed service) runs under this bubblewrap;
    # when it cannot, that code does not run (no unconfined fallback).
    bwrap_path: str = "bwrap"
    ci_output_max_chars: int = Field(default=20000, ge=1000)
    teardown_timeout_seconds: float = Field(default=30.0, gt=0)
    # At teardown the run is over and its data discarded: SIGTERM gets this long to end a
    # process before SIGKILL, not the drain a redeploy allows (`stop_timeout_seconds`).
    teardown_grace_seconds: float = Field(default=0.5, ge=0)
    # Go runtime of the run's Prometheus and Alertmanager (GOGC, GOMEMLIMIT); "" = Go's own.
    observability_gogc: str = "50"
    observability_gomemlimit: str = ""
    # The compose topology's stack image installs the stack's requirements from here,
    # offline (the lockfile's wheels, downloaded on the host by scripts/compose-context).
    compose_wheels: Path = Field(default_factory=default_compose_wheels)
    cache_dir: Path | None = None
    """Where what a run makes once for every later run is kept (content-addressed, harness
    state, out of every agent's reach); unset: `<engine home>/cache`."""
    seed_snapshots: bool = True
    """A run's seed comes from a snapshot of an earlier run's seed of the same stack version
    (`_seed_snapshot`, under `cache_dir`/seeds) when there is one; the first run makes it."""
    ci_base_reports: bool = True
    """The CI gate learns a hand-off tree's own tests once (`gate/_base_reports`, under
    `cache_dir`/ci-base), not once per run."""
    stacks_die_with_owner: bool = False
    """A stack no other process will adopt (its owner is a CLI: `sreforge run` on the
    embedded engine, `stack up`, `guard`): a warden tears it down the moment its owner
    ends, however it ends, and the next engine start reaps one whose warden died too
    (`sreforge_deployer.local`, "Who owns a stack" in its README). Off for an engine whose
    deployer's stacks a restarted deployer adopts (`sreforge up`, `serve`)."""

    @property
    def cache_at(self) -> Path:
        """The cache folder (`cache_dir`, else `<engine home>/cache`)."""
        return self.cache_dir or self.engine_home / "cache"
