"""Harness secrets never reach a run folder: what the recorder writes is redacted first.

The values come from the recorder's own bus connection (`Bus.secrets`: the engine home's
credentials and tokens, `sreforge_bus.HarnessSecrets`). Events and the agent's transcript
are redacted as models on the way in (so `events.jsonl`, `record.json`, `diff.patch`,
`rca.txt` and the bank derive from clean data, and the record's sha256 is that of what is
written); the folder is then swept file by file (`agent/` holds the agent's files as it
wrote them) before the record is banked or judged.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TypeVar

import structlog
from pydantic import BaseModel
from sreforge_bus import HarnessSecrets

__all__ = ["redact_folder", "redacted"]

M = TypeVar("M", bound=BaseModel)

_LOCK_FILE = ".lock"


def redacted(
    model: M, secrets: HarnessSecrets, log: structlog.stdlib.BoundLogger, **where: str
) -> M:
    """`model` without a harness secret; a redaction is logged (the count, never the value).

    `SecretRefused` (a bus error: the message is redelivered, then dead-lettered) when
    redacting leaves it invalid, so it is never written with the secret.
    """
    clean, count = secrets.redact_model(model)
    if count:
        log.warning("harness secret redacted", what=type(model).__name__, count=count, **where)
    return clean


def redact_folder(folder: Path, secrets: HarnessSecrets) -> dict[str, int]:
    """Redact every regular file under `folder` in place; return the redactions per file
    (relative path → count). Symlinks are neither followed nor rewritten."""
    found: dict[str, int] = {}
    for directory, _, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(directory, name)
            if name == _LOCK_FILE and path.parent == folder:
                continue
            count = _redact_file(path, secrets)
            if count:
                found[path.relative_to(folder).as_posix()] = count
    return found


def _redact_file(path: Path, secrets: HarnessSecrets) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0  # a symlink or a file gone meanwhile: nothing of ours to rewrite
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return 0
        data = handle.read()
    if not secrets.found_in(data):
        return 0
    clean, count = secrets.redact(data)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.redacted")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, info.st_mode & 0o777)
        with os.fdopen(descriptor, "wb") as out:
            out.write(clean)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    return count
