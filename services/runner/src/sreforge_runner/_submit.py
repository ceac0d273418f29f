"""The agent's `submit` command and the sentinel it leaves in the workspace.

`submit` is a small POSIX shell script in a per-run bin dir (outside the
workspace) on the agent's PATH. It writes `.oncall/submitted` (`SUBMISSION_DIR`) atomically (a
temporary file renamed into place), after copying `--rca FILE` to
`.oncall/rca.md` the same way. The folder is git-ignored through
`.git/info/exclude` and left out of the diff.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sreforge_contracts import SUBMISSION_DIR

__all__ = [
    "RCA_FILE",
    "SENTINEL_DIR",
    "SENTINEL_FILE",
    "Sentinel",
    "exclude_paths",
    "exclude_sentinel_dir",
    "install_submit",
    "read_sentinel",
]

SENTINEL_DIR = SUBMISSION_DIR
SENTINEL_FILE = "submitted"
RCA_FILE = "rca.md"
_MAX_SENTINEL_BYTES = 4096

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
    then neither in the agent's `git status` nor in the submitted diff."""
    exclude = workspace / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text() if exclude.exists() else ""
    missing = [line for line in dict.fromkeys(patterns) if line not in current.splitlines()]
    if missing:
        separator = "" if not current or current.endswith("\n") else "\n"
        exclude.write_text(current + separator + "".join(f"{line}\n" for line in missing))


def read_sentinel(workspace: Path, max_rca_bytes: int = 256_000) -> Sentinel | None:
    """The sentinel, or None when the agent never submitted (or left it unreadable)."""
    folder = workspace / SENTINEL_DIR
    try:
        with (folder / SENTINEL_FILE).open("rb") as handle:
            raw = handle.read(_MAX_SENTINEL_BYTES + 1)
        if len(raw) > _MAX_SENTINEL_BYTES:
            return None  # the agent's, not submit's: submit writes a few dozen bytes
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):  # json.loads recurses on deep nesting
        return None
    if not isinstance(data, dict):
        return None
    rca = None
    if data.get("rca") is True:
        try:
            with (folder / RCA_FILE).open("rb") as handle:
                rca = handle.read(max_rca_bytes).decode(errors="replace")
        except OSError:
            rca = None
    return Sentinel(submitted_at=str(data.get("submitted_at", "")), rca=rca)
