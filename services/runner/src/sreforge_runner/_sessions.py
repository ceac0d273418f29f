"""A CLI agent's native session files, copied out of its HOME before HOME is removed.

Each preset keeps its own record (Claude's session JSONL, Codex rollouts, Gemini
sessions, Aider histories, mini-swe-agent's trajectory). `SESSION_FILES` names
them per preset as globs under the agent's HOME (each row checked against the
real CLI's files). Only those files are copied (never auth files), each capped with the cut
noted, with every known secret value replaced, into `<agent dir>/native/`.
mini-swe-agent's own submission (`exit_status = "Submitted"` in its trajectory)
counts as `submit`. HOME is the agent's: every file is opened through
`sreforge_confine`'s untrusted-file helpers (no link followed at any component, only
a regular file, capped); a refused one is logged and not collected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from types import MappingProxyType

import structlog
from sreforge_confine import (
    UntrustedFileMissing,
    UntrustedFileRefused,
    is_untrusted_file,
    read_untrusted,
)

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
_TRAJECTORY = PurePosixPath("session", "traj.json")
log = structlog.get_logger("sreforge.runner")


def collect_native(
    preset: str, home: Path, into: Path, secrets: Mapping[str, str]
) -> list[KeptFile]:
    """Copy the preset's session files from `home` into `into` (capped, redacted);
    each kept file is named relative to `into`'s parent (`native/<path under HOME>`)."""
    copied: list[KeptFile] = []
    seen: set[Path] = set()
    for pattern in SESSION_FILES.get(preset, ()):
        for source in sorted(home.glob(pattern)):
            relative = source.relative_to(home)
            # A cheap first look (no link on the way, a regular file); the open decides.
            if source in seen or len(copied) >= _MAX_FILES or not is_untrusted_file(home, relative):
                continue
            seen.add(source)
            name = f"{into.name}/{relative.as_posix()}"
            try:
                kept = keep_file(
                    source, into / relative, cap=_CAP, secrets=secrets, name=name, root=home
                )
            except UntrustedFileRefused as refused:
                log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
                continue
            copied.append(kept)
    return copied


def mini_swe_submitted(home: Path) -> bool:
    """True when mini-swe-agent's trajectory says it submitted."""
    try:
        trajectory = json.loads(read_untrusted(home, _TRAJECTORY, cap=_CAP))
    except UntrustedFileMissing:
        return False
    except UntrustedFileRefused as refused:
        log.warning("agent_file.refused", path=refused.path, reason=refused.reason)
        return False
    except (ValueError, RecursionError):
        return False
    info = trajectory.get("info") if isinstance(trajectory, dict) else None
    return isinstance(info, dict) and info.get("exit_status") == "Submitted"
