"""The agent's `submit` command and the sentinel it leaves in the workspace.

`submit` is a small POSIX shell script in a per-run bin dir (outside the
workspace) on the agent's PATH. It writes `.oncall/submitted` (`SUBMISSION_DIR`) atomically (a
temporary file renamed into place), after copying `--rca FILE` to
`.oncall/rca.md` the same way. The folder is git-ignored through
`.git/info/exclude` and left out of the diff.

The agent owns the workspace: the sentinel, the RCA and `.git/info/exclude` are read
and written through `sreforge_confine`'s untrusted-file helpers, so a symlink the agent
left there (to the engine home's credentials, to the scenario's `verify/`) is refused,
logged and taken as nothing there, never followed.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import structlog
from sreforge_confine import (
    UntrustedFileMissing,
    UntrustedFileRefused,
    open_untrusted,
    read_untrusted,
    write_untrusted,
)
from sreforge_contracts import SUBMISSION_DIR

__all__ = [
    "RCA_FILE",
    "SENTINEL_DIR",
    "SENTINEL_FILE",
    "Sentinel",
    "exclude_paths",
    "exclude_sentinel_dir",
    "has_submitted",
    "install_submit",
    "read_sentinel",
    "write_sentinel",
]

SENTINEL_DIR = SUBMISSION_DIR
SENTINEL_FILE = "submitted"
RCA_FILE = "rca.md"
_MAX_SENTINEL_BYTES = 4096
_MAX_EXCLUDE_BYTES = 1_000_000
_EXCLUDE = PurePosixPath(".git", "info", "exclude")
_SENTINEL = PurePosixPath(SENTINEL_DIR, SENTINEL_FILE)
log = structlog.get_logger("sreforge.runner")

_SCRIPT = """#!/bin/sh
# submit: hand your change over to CI and deployment. Usage: submit [--rca FILE]
set -eu
dir={sentinel_dir}
rca=
while [ "$#" -gt 0 ]; do
  case "$1" in
    --rca)
      [ "$#" -ge 2 ] || {{ echo "submit: --rca needs a FILE" >&2; exit 2; }}
      rca=$2; shift 2 ;;
    --rca=*) rca=${{1#--rca=}}; shift ;;
    -h|--help) echo "usage: submit [--rca FILE]"; exit 0 ;;
    *) echo "submit: unknown argument: $1 (usage: submit [--rca FILE])" >&2; exit 2 ;;
  esac
done
if [ -n "$rca" ] && [ ! -f "$rca" ]; then
  echo "submit: no such file: $rca" >&2; exit 2
fi
mkdir -p "$dir"
has_rca=false
if [ -n "$rca" ]; then
  cp "$rca" "$dir/.rca.$$"
  mv -f "$dir/.rca.$$" "$dir/{rca_file}"
  has_rca=true
fi
printf '{{"submitted_at": "%s", "rca": %s}}\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$has_rca" \\
  > "$dir/.{sentinel_file}.$$"
mv -f "$dir/.{sentinel_file}.$$" "$dir/{sentinel_file}"
echo "Submitted."
"""


@dataclass(frozen=True)
class Sentinel:
    """What `submit` left: when, and the RCA text if one was attached."""

    submitted_at: str
    rca: str | None


def install_submit(bin_dir: Path, workspace: Path) -> Path:
    """Write the `submit` executable for `workspace` into `bin_dir`; return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = _SCRIPT.format(
        sentinel_dir=shlex.quote(str(workspace / SENTINEL_DIR)),
        sentinel_file=SENTINEL_FILE,
        rca_file=RCA_FILE,
    )
    path = bin_dir / "submit"
    path.write_text(script)
    path.chmod(0o755)
    return path


def exclude_sentinel_dir(workspace: Path) -> None:
    """Git-ignore the submission folder in this clone only (`.git/info/exclude`), once."""
    exclude_paths(workspace, (f"/{SENTINEL_DIR}/",))


def exclude_paths(workspace: Path, patterns: Sequence[str]) -> None:
    """Git-ignore `patterns` in this clone only (`.git/info/exclude`), each once: they are
    then neither in the agent's `git status` nor in the submitted diff. A link the agent
    left at `.git/info/exclude` is replaced, never written through; through a linked
    `.git` or `.git/info` nothing is written (logged)."""
    try:
        current = read_untrusted(workspace, _EXCLUDE, cap=_MAX_EXCLUDE_BYTES).decode(
            errors="replace"
        )
    except UntrustedFileMissing:
        current = ""
    except UntrustedFileRefused as refused:
        log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
        current = ""
    missing = [line for line in dict.fromkeys(patterns) if line not in current.splitlines()]
    if missing:
        separator = "" if not current or current.endswith("\n") else "\n"
        text = current + separator + "".join(f"{line}\n" for line in missing)
        try:
            write_untrusted(workspace, _EXCLUDE, text.encode(), make_parents=True)
        except UntrustedFileRefused as refused:
            log.warning("agent_file.refused", path=refused.path, reason=refused.reason)


def read_sentinel(workspace: Path, max_rca_bytes: int = 256_000) -> Sentinel | None:
    """The sentinel, or None when the agent never submitted (or left it unreadable: a
    link, not a regular file, too big). An RCA that is not a plain file is no RCA."""
    data = _sentinel_data(workspace)
    if data is None:
        return None
    rca = _read_rca(workspace, max_rca_bytes) if data.get("rca") is True else None
    return Sentinel(submitted_at=str(data.get("submitted_at", "")), rca=rca)


def has_submitted(workspace: Path) -> bool:
    """True when the workspace holds a sentinel `read_sentinel` takes (the RCA unread)."""
    return _sentinel_data(workspace) is not None


def write_sentinel(workspace: Path, submitted_at: str) -> None:
    """Submit for an agent whose exit is its submission (no RCA); a link or folder the
    agent left on the way is replaced or refused (logged), never written through."""
    text = json.dumps({"submitted_at": submitted_at, "rca": False}) + "\n"
    try:
        write_untrusted(workspace, _SENTINEL, text.encode(), make_parents=True)
    except UntrustedFileRefused as refused:
        log.warning("agent_file.refused", path=refused.path, reason=refused.reason)


def _sentinel_data(workspace: Path) -> dict[str, object] | None:
    try:
        data = json.loads(read_untrusted(workspace, _SENTINEL, cap=_MAX_SENTINEL_BYTES))
    except UntrustedFileMissing:
        return None
    except UntrustedFileRefused as refused:  # submit writes a few dozen bytes, never a link
        log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
        return None
    except (ValueError, RecursionError):  # json.loads recurses on deep nesting
        return None
    return data if isinstance(data, dict) else None


def _read_rca(workspace: Path, max_rca_bytes: int) -> str | None:
    """The RCA's first `max_rca_bytes` (the Submitted event's fit cuts it further)."""
    try:
        with open_untrusted(workspace, PurePosixPath(SENTINEL_DIR, RCA_FILE)) as handle:
            return handle.read(max_rca_bytes).decode(errors="replace")
    except UntrustedFileMissing:
        return None
    except UntrustedFileRefused as refused:
        log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
        return None
    except OSError:
        return None
