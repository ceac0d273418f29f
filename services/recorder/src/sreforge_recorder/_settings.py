"""The recorder's settings (env prefix `SREFORGE_RECORDER_`)."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from sreforge_contracts.schemas import SCHEMA_DIR

__all__ = ["RecorderSettings", "default_store_dir", "installed_engine_version"]


def default_store_dir() -> Path:
    """`$SREFORGE_HOME/record-store`, else `~/.local/state/sreforge/record-store`."""
    home = os.environ.get("SREFORGE_HOME")
    base = Path(home) if home else Path.home() / ".local" / "state" / "sreforge"
    return base / "record-store"


def installed_engine_version() -> str:
    """The installed `sreforge` distribution's version (the recorder's own as a fallback)."""
    for distribution in ("sreforge", "sreforge-recorder"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


class RecorderSettings(BaseSettings):
    """Where run folders, pruned records and the full-record store live; banking policy.

    Relative paths resolve against the engine's working directory.
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_RECORDER_", frozen=True)

    runs_dir: Path = Path("runs")
    """`<runs_dir>/<run_id>/`: events.jsonl, record.json and the other artifacts."""
    records_root: Path = Path("use-cases")
    """Pruned records go to `<records_root>/<uc>/scenarios/<id>/records/<run_id>.json`."""
    store_dir: Path = Field(default_factory=default_store_dir)
    """The content-addressed full-record store: `<store_dir>/sha256/<2>/<64>.json`."""
    bank: bool = True
    """Off: write only `runs/<id>/`, no pruned record and no store entry."""
    allow_unlabelled: bool = False
    """Operator override: bank verdict-bearing records without a labelled agent transcript."""
    schema_path: Path = SCHEMA_DIR / "run-record.v1.schema.json"
    """The committed run-record.v1 JSON Schema every record is validated against."""
    engine_version: str = Field(default_factory=installed_engine_version)
    """Stamped into every record's `engine_version`."""
    backfill_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long a terminal event may spend reading the run's earlier events off the stream."""
    judge: bool = True
    """Judge each recorded run's RCA (`SREFORGE_JUDGE_*`; without a model it writes why not)."""
    dashboard: bool = True
    """Serve the live dashboard (only with a token: never an open one)."""
    dashboard_host: str = "127.0.0.1"
    """Loopback unless configured otherwise."""
    dashboard_port: int = Field(default=8787, ge=0, le=65535)
    """0: any free port."""
    dashboard_token: SecretStr | None = None
    """The operator's token; else read from `dashboard_token_file`."""
    dashboard_token_file: Path | None = None
    """A 0600 file holding the token (the engine writes `<home>/dashboard.token`)."""
    dashboard_url_file: Path | None = None
    """Where the dashboard's URL (without the token) is written once it listens, and removed
    when it stops: how a client finds the port it took (the engine wires `<home>/dashboard.url`)."""

    def dashboard_secret(self) -> str | None:
        """The dashboard's token, or None when none is configured (then it is not served)."""
        if self.dashboard_token is not None:
            return self.dashboard_token.get_secret_value() or None
        if self.dashboard_token_file is not None:
            try:
                return self.dashboard_token_file.read_text().strip() or None
            except OSError:
                return None
        return None
