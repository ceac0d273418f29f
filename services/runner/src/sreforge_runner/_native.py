"""A CLI agent's native session files, copied out of its HOME before HOME is removed.

Each preset keeps its own record (Claude's session JSONL, Codex rollouts, Gemini
sessions, Aider histories, mini-swe-agent's trajectory). Only those files are
copied (never auth files), each capped, with every known secret value replaced,
into `<agent dir>/native/`. mini-swe-agent's own submission (`exit_status =
"Submitted"` in its trajectory) counts as `submit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from sreforge_runner._transcript import redact

__all__ = ["NATIVE_DIR", "NATIVE_GLOBS", "collect_native", "mini_swe_submitted"]

NATIVE_DIR = "native"
NATIVE_GLOBS: dict[str, tuple[str, ...]] = {
    "claude-code": (".claude/projects/**/*.jsonl",),
    "codex": (".codex/sessions/**/rollout-*.jsonl",),
    "gemini-cli": (".gemini/tmp/**/session-*.json",),
    "aider": ("session/chat.md", "session/llm.log"),
    "mini-swe-agent": ("session/traj.json",),
}
"""Per preset: the native session files, relative to the agent's HOME."""
_CAP = 20_000_000


def collect_native(
    preset: str, home: Path, into: Path, secrets: Mapping[str, str]
) -> tuple[list[str], int]:
    """Copy the preset's session files from `home` into `into`; (files, redactions)."""
    copied: list[str] = []
    redactions = 0
    root = home.resolve()
    for pattern in NATIVE_GLOBS.get(preset, ()):
        for source in sorted(home.glob(pattern)):
            # The agent owns HOME: a symlink must not pull a host file into the record.
            if source.is_symlink() or not source.resolve().is_relative_to(root):
                continue
            if not source.is_file():
                continue
            relative = source.relative_to(home)
            with source.open("rb") as handle:
                data = handle.read(_CAP)
            text, count = redact(data.decode(errors="replace"), secrets)
            target = into / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            copied.append(str(relative))
            redactions += count
    return copied, redactions


def mini_swe_submitted(home: Path) -> bool:
    """True when mini-swe-agent's trajectory says it submitted."""
    try:
        trajectory = json.loads((home / "session" / "traj.json").read_text())
    except (OSError, ValueError):
        return False
    info = trajectory.get("info") if isinstance(trajectory, dict) else None
    return isinstance(info, dict) and info.get("exit_status") == "Submitted"
