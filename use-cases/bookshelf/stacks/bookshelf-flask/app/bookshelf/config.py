"""Runtime settings, read from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_CACHE_TTL_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the service needs to know about its surroundings."""

    db_path: str
    upstream_url: str
    cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS
    upstream_timeout_seconds: float = 5.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Settings from `BOOKSHELF_*` variables (see README)."""
        return cls(
            db_path=environ.get("BOOKSHELF_DB_PATH", "bookshelf.db"),
            upstream_url=environ.get("BOOKSHELF_UPSTREAM_URL", "http://127.0.0.1:8081"),
            cache_ttl_seconds=_seconds(
                environ, "BOOKSHELF_CACHE_TTL_SECONDS", DEFAULT_CACHE_TTL_SECONDS
            ),
            upstream_timeout_seconds=_seconds(environ, "BOOKSHELF_UPSTREAM_TIMEOUT_SECONDS", 5.0),
        )


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value
