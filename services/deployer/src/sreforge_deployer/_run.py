"""A run's identity and its folder, the same on every topology.

`RunIdentity` is what `LocalStack` and `ComposeStack` both derive from their constructor
arguments: the run id (`run-<8 hex>` unless given), the run dir under the runs root, the
time scale, and how the run's Alertmanager pages (the opaque route and its bearer
token). `RunLayout` is where a run's parts live in that dir.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import psutil

from sreforge_deployer._errors import DeployerError
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._token import read_or_create_token

__all__ = ["RunIdentity", "RunLayout", "own_start_time", "owner_running", "remove_run_dir"]


@dataclass(frozen=True)
class RunLayout:
    """The folders of one run dir: the workspace, the service's data, logs, observability."""

    run_dir: Path

    @property
    def workspace(self) -> Path:
        """The run's git workspace (the service runs from it, the agent works in it)."""
        return self.run_dir / "workspace"

    @property
    def data(self) -> Path:
        """The run's data (the service's SQLite file): the one folder the service may write."""
        return self.run_dir / "data"

    @property
    def logs(self) -> Path:
        """Where every component's log file goes."""
        return self.run_dir / "logs"

    @property
    def observability(self) -> Path:
        """The rendered Prometheus and Alertmanager configs and their data."""
        return self.run_dir / "observability"


@dataclass(frozen=True)
class RunIdentity:
    """Who a run's stack is, whatever runs it."""

    run_id: str
    time_scale: float
    layout: RunLayout
    webhook_route: str
    webhook_token: str
    webhook_base: str | None

    @classmethod
    def describe(
        cls,
        settings: DeployerSettings,
        *,
        time_scale: float,
        run_id: str | None,
        webhook_url: str | None,
        webhook_route: str | None,
        webhook_token_file: Path | None,
    ) -> RunIdentity:
        """The identity of a stack's constructor arguments (fresh id, route, token if none).

        A shared token file (the trigger's) is read as is; without one the run mints its
        own token. `ValueError` for a time scale outside (0, 1].
        """
        if not 0 < time_scale <= 1:
            raise ValueError(f"time_scale must be in (0, 1], got {time_scale}")
        run_id = run_id or f"run-{secrets.token_hex(4)}"
        token = (
            read_or_create_token(webhook_token_file)
            if webhook_token_file
            else secrets.token_urlsafe(32)
        )
        return cls(
            run_id=run_id,
            time_scale=time_scale,
            layout=RunLayout(settings.runs_root / run_id),
            webhook_route=webhook_route or secrets.token_hex(12),
            webhook_token=token,
            webhook_base=webhook_url,
        )

    @property
    def run_dir(self) -> Path:
        """`<runs root>/<run id>`."""
        return self.layout.run_dir

    @property
    def webhook_url(self) -> str | None:
        """The per-run opaque route Alertmanager posts to (None without a receiver)."""
        if self.webhook_base is None:
            return None
        return f"{self.webhook_base.rstrip('/')}/{self.webhook_route}"

    def make_run_dir(self) -> None:
        """Create the run dir (0700); `DeployerError` when it exists (a run id reused)."""
        if self.run_dir.exists():
            raise DeployerError(f"run dir {self.run_dir} already exists (run id reused?)")
        self.run_dir.mkdir(parents=True, mode=0o700)


def remove_run_dir(run_dir: Path) -> None:
    """Delete the run dir; tolerate it being gone already."""
    shutil.rmtree(run_dir, ignore_errors=True)


def own_start_time() -> float:
    """This process's start time, as a stack's record keeps its owner's."""
    return psutil.Process().create_time()


def owner_running(pid: int, started_at: float | None) -> bool:
    """Whether a stack's owner still runs: `pid` alive (not a zombie) and, when known,
    started at `started_at` (pids wrap at 32768 here: a killed owner's pid may be reused)."""
    try:
        owner = psutil.Process(pid)
        if owner.status() == psutil.STATUS_ZOMBIE:
            return False
        started = owner.create_time()
    except psutil.NoSuchProcess:
        return False
    return started_at is None or abs(started - started_at) < 1.0
