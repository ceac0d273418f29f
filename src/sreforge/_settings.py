"""The engine's settings, read from `SREFORGE_*` environment variables."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sreforge._logging import LogFormat

__all__ = ["EngineSettings"]


def _default_home() -> Path:
    return Path.home() / ".local" / "state" / "sreforge"


def _default_tools() -> Path:
    # Not under the engine home: its path names the harness, and a confined agent can
    # read where its tools are mounted from (/proc/self/mountinfo).
    data = os.environ.get("XDG_DATA_HOME")
    return (Path(data) if data else Path.home() / ".local" / "share") / "agent-tools"


class EngineSettings(BaseSettings):
    """Where the engine keeps state and which NATS it talks to.

    With `nats_url` unset, `sreforge up` starts its own pinned nats-server (the embedded
    default) and advertises it in `home/engine.json` so `sreforge tail` and `sreforge run`
    in another shell find it.
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_", extra="ignore")

    nats_url: str | None = None
    home: Path = Field(default_factory=_default_home)
    tools: Path = Field(default_factory=_default_tools)
    """Where `sreforge agents install` puts real CLIs (`SREFORGE_TOOLS`; default
    `$XDG_DATA_HOME/agent-tools`, else `~/.local/share/agent-tools`): a neutral path,
    since the agent can read its tools' host path."""
    log_format: LogFormat = "console"
    log_level: str = "INFO"
    nats_replicas: int = Field(default=1, ge=1, le=5)
    """How many NATS nodes keep each stream and the run store (3 on a 3-node cluster)."""
    worker_hosts: str = ""
    """Worker hosts besides this one (comma-separated): the bus permissions list their
    durables too, so one `server.conf` serves every host (`sreforge bus config`)."""
    worker_slots: int = Field(default=2, ge=1)
    """Stacks a worker host runs at once (`sreforge serve --worker`)."""
    worker_lease_ttl_seconds: float = Field(default=15.0, gt=0)
    """How long a worker host's lease holds unrenewed: the longest its runs outlive it."""

    def known_worker_hosts(self, extra: str | None = None) -> list[str]:
        """`worker_hosts` and `extra`, each once, in order."""
        hosts = [h.strip() for h in self.worker_hosts.split(",") if h.strip()]
        return list(dict.fromkeys([*hosts, *([extra] if extra else [])]))

    @property
    def bus_dir(self) -> Path:
        """The bus credentials (`<user>.json`, 0600) and `server.conf` (also the embedded store)."""
        return self.home / "nats"

    @property
    def engine_file(self) -> Path:
        """The file where a running embedded engine advertises its NATS URL."""
        return self.home / "engine.json"
