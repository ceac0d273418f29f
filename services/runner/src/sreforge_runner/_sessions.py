"""A CLI agent's native session files, copied out of its HOME before HOME is removed.

Each preset keeps its own record (Claude's session JSONL, Codex rollouts, Gemini
sessions, Aider histories, mini-swe-agent's trajectory). `SESSION_FILES` names
them per preset as globs under the agent's HOME (each row checked against the
real CLI's files). Only those files are copied (never auth files), each capped with the cut
noted, with every known secret value replaced, into `<agent dir>/native/`.
mini-swe-agent's own submission (`exit_status = "Submitted"` in its trajectory)
counts as `submit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from sreforge_runner._kept import NATIVE_DIR, KeptFile, keep_file

__all__ = ["NATIVE_DIR", "SESSION_FILES", "collect_native", "mini_swe_submitted"]

SESSION_FILES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "claude-code": (".claude/projects/**/*.jsonl",),
        "codex": (".codex/sessions/**/rollout-*.jsonl",),
        "gemini-cli": (".gemini/tmp/*/chats/session-*.jsonl",),
        "aider": ("session/chat.md", "session/llm.log", "session/input.history"),
        "mini-swe-agent": ("session/traj.json",),
    }
)
"""Per preset: the native session files, as globs relative to the agent's HOME."""
_CAP = 20_000_000
_MAX_FILES = 200


def collect_native(
    preset: str, home: Path, into: Path, secrets: Mapping[str, str]
) -> list[KeptFile]:
    """Copy the preset's session files from `home` into `into` (capped, redacted);
    each kept file is named relative to `into`'s parent (`native/<path under HOME>`)."""
    copied: list[KeptFile] = []
    root = home.resolve()
    seen: set[Path] = set()
    for pattern in SESSION_FILES.get(preset, ()):
        for source in sorted(home.glob(pattern)):
            # The agent owns HOME: a symlink must not pull a host file into the record.
            if source in seen or source.is_symlink() or not source.is_file():
                continue
            if not source.resolve().is_relative_to(root) or len(copied) >= _MAX_FILES:
                continue
            seen.add(source)
            relative = source.relative_to(home)
            name = f"{into.name}/{relative.as_posix()}"
            copied.append(keep_file(source, into / relative, cap=_CAP, secrets=secrets, name=name))
    return copied


def mini_swe_submitted(home: Path) -> bool:
    """True when mini-swe-agent's trajectory says it submitted."""
    try:
        trajectory = json.loads((home / "session" / "traj.json").read_text())
    except (OSError, ValueError):
        return False
    info = trajectory.get("info") if isinstance(trajectory, dict) else None
    return isinstance(info, dict) and info.get("exit_status") == "Submitted"
