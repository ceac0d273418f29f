"""The bearer token a stack's Alertmanager presents, shared with the trigger through a file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from sreforge_deployer._errors import DeployerError

__all__ = ["read_or_create_token"]


def read_or_create_token(path: Path) -> str:
    """The shared token from `path`, created (0600) if absent.

    The trigger creates the file the same way, so whichever starts first mints the
    token and the other reads it.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as error:
        raise DeployerError(f"webhook token file {path}: cannot create ({error})") from error
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise DeployerError(f"webhook token file {path}: cannot read ({error})") from error
    if not token:
        raise DeployerError(f"webhook token file {path} is empty")
    return token
