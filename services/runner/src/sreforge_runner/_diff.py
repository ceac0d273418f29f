"""The submission's diff: the whole working tree against the base commit.

Committed, staged, unstaged and new untracked files all count (what the agent
leaves in the workspace is what ships); `.oncall/` never does. The tree is
staged into a throwaway index (`GIT_INDEX_FILE`), so the agent's own index and
history are untouched. None of the agent's git programs runs here: no hooks, no
fsmonitor, and every filter driver its config names is disarmed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sreforge_git import GitError, git, run_git

from sreforge_runner._errors import DiffError
from sreforge_runner._submit import SENTINEL_DIR

__all__ = ["head_commit", "reset_workspace", "workspace_diff"]

_GIT_TIMEOUT_S = 120.0
# The agent controls the repo's config; none of it may run code on the runner's side.
_SAFE = {"core.fsmonitor": "false", "core.hooksPath": "/dev/null", "core.quotepath": "off"}


def head_commit(workspace: Path) -> str:
    """The commit the workspace's HEAD points at."""
    return _git(workspace, "rev-parse", "--verify", "HEAD^{commit}").strip()


def reset_workspace(workspace: Path, base: str) -> None:
    """Back to the hand-off state: HEAD, index and tracked files at `base`, untracked
    files gone (ignored ones, such as `.oncall/` and the app's caches, stay)."""
    disarmed = _disarmed_filters(workspace)
    _git(workspace, "reset", "-q", "--hard", base, extra=disarmed)
    _git(workspace, "clean", "-q", "-f", "-d", extra=disarmed)


def workspace_diff(workspace: Path, base: str) -> str:
    """`git diff --binary <base> <tree of the working tree>`, `.oncall/` excluded."""
    disarmed = _disarmed_filters(workspace)
    with tempfile.TemporaryDirectory(prefix="diff-index-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(workspace, "read-tree", "HEAD", env=index, extra=disarmed)
        _git(workspace, "add", "-A", env=index, extra=disarmed)
        _git(
            workspace,
            "rm",
            "-r",
            "-q",
            "--cached",
            "--ignore-unmatch",
            "--",
            SENTINEL_DIR,
            env=index,
            extra=disarmed,
        )
        tree = _git(workspace, "write-tree", env=index, extra=disarmed).strip()
    return _git(
        workspace,
        "diff",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        base,
        tree,
        extra=disarmed,
    )


def _disarmed_filters(workspace: Path) -> dict[str, str]:
    """Empty clean/smudge/process (and not required) for each filter driver the repo's
    config defines: `add` would otherwise run the agent's clean program on this side."""
    try:
        listed = run_git(workspace, "config", "--get-regexp", r"^filter\.", config=_SAFE)
    except GitError as error:
        raise DiffError(str(error)) from error
    disarmed = {}
    for line in listed.stdout.splitlines():
        key = line.split(" ", 1)[0]
        name = key[len("filter.") : key.rfind(".")]
        for field in ("clean", "smudge", "process"):
            disarmed[f"filter.{name}.{field}"] = ""
        disarmed[f"filter.{name}.required"] = "false"
    return disarmed


def _git(
    workspace: Path,
    *args: str,
    env: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> str:
    config = {**_SAFE, **(extra or {})}
    try:
        return git(workspace, *args, env=env, config=config, timeout_s=_GIT_TIMEOUT_S)
    except GitError as error:
        raise DiffError(str(error)) from error
