"""The trigger service's settings, read from `SREFORGE_TRIGGER_*` environment variables."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sreforge_trigger._errors import TokenError

__all__ = ["TriggerSettings"]


class TriggerSettings(BaseSettings):
    """Where the HTTP receiver listens, how senders authenticate, and what to poll.

    The bearer token comes from `token`, else from `token_file`; a `token_file` that
    does not exist yet is created with a fresh random token (mode 0600), so the
    engine and the stacks it deploys can share one file. `poll_url` (a Prometheus
    base URL) turns the `/api/v1/alerts` poller on.
    """

    model_config = SettingsConfigDict(env_prefix="SREFORGE_TRIGGER_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=9477, ge=0, le=65535)
    token: SecretStr | None = None
    token_file: Path | None = None
    publish_timeout: float = Field(default=5.0, gt=0)
    dedupe_size: int = Field(default=65536, ge=1)
    poll_url: str | None = None
    poll_interval: float = Field(default=5.0, gt=0)
    poll_route: str | None = None
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """The largest webhook or feed body accepted; a larger one is refused with 413."""

    def bearer_token(self) -> SecretStr:
        """The token senders must present; `TokenError` when none is configured or readable."""
        if self.token is not None:
            return _non_empty(self.token, "SREFORGE_TRIGGER_TOKEN")
        if self.token_file is None:
            raise TokenError(
                "trigger: no webhook token: "
                "set SREFORGE_TRIGGER_TOKEN or SREFORGE_TRIGGER_TOKEN_FILE"
            )
        return _non_empty(_read_or_create(self.token_file), str(self.token_file))


def _read_or_create(path: Path) -> SecretStr:
    try:
        return SecretStr(path.read_text().strip())
    except FileNotFoundError:
        pass
    except OSError as err:
        raise TokenError(f"trigger: token file {path}: cannot read ({err.strerror})") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    # Written whole under a name of its own, then linked into place: the path never exists
    # empty, so a process starting beside this one (a second worker host on the same
    # home) reads the token or nothing, never a half-made file.
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(token)
        os.link(draft, path)
    except FileExistsError:
        return SecretStr(path.read_text().strip())  # another process won the race
    finally:
        draft.unlink(missing_ok=True)
    return SecretStr(token)


def _non_empty(token: SecretStr, where: str) -> SecretStr:
    if not token.get_secret_value():
        raise TokenError(f"trigger: webhook token from {where} is empty")
    return token
