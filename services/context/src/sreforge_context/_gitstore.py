"""What a git repo holds beyond its history: stray objects and the `.git` folder's own files.

`git log --all` shows only commits reachable from a ref. An agent can still read
every object in the store (`git fsck --lost-found`, `git cat-file --batch-all-objects`):
an amended or reset commit, a blob a tag points at, a dropped stash. It can also
read `.git` itself: `config`, `description`, hooks, `info/exclude`, `packed-refs`,
the reflogs under `logs/`, `COMMIT_EDITMSG`, `ORIG_HEAD`, the index's paths.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sreforge_confine import UntrustedFileRefused, read_untrusted
from sreforge_contracts import Surface
from sreforge_git import GitError, git, git_env

from sreforge_context._errors import WorkspaceUnreadable

__all__ = ["decoded_text", "git_dir_surfaces", "git_text", "stray_object_surfaces"]

_MAX_TEXT_BYTES = 2_000_000
_BINARY_PROBE_BYTES = 8192
_GIT_TIMEOUT_S = 60.0


def stray_object_surfaces(root: Path, shown_commits: list[str]) -> list[Surface]:
    """Every object in the store that the commits in `shown_commits` do not show."""
    listed = git_text(root, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    every = set(listed.split()) - _objects_of(root, shown_commits)
    # A ref's own tag object is read with the refs (its message); what it points at is not.
    refs = git_text(root, "for-each-ref", "--format=%(objecttype) %(objectname)").split("\n")
    every -= {line.split()[1] for line in refs if line.startswith("tag ")}
    if not every:
        return []
    return [s for s in _read_objects(root, sorted(every)) if s.text.strip()]


def _objects_of(root: Path, commits: list[str]) -> set[str]:
    if not commits:
        return set()
    lines = _git_stdin(root, ["rev-list", "--objects", "--stdin"], commits).decode().splitlines()
    return {line.split(" ", 1)[0] for line in lines if line}


def _git_stdin(root: Path, args: list[str], lines: list[str]) -> bytes:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            env=git_env(),
            input=("\n".join(lines) + "\n").encode(),
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise WorkspaceUnreadable(f"git {args[0]} in {root} failed: {error}") from error
    return done.stdout


def _read_objects(root: Path, shas: list[str]) -> list[Surface]:
    surfaces, data, at = [], _git_stdin(root, ["cat-file", "--batch"], shas), 0
    while at < len(data):
        header_end = data.index(b"\n", at)
        sha, kind, size = data[at:header_end].decode().split()
        body = data[header_end + 1 : header_end + 1 + int(size)]
        at = header_end + 1 + int(size) + 1
        text = _tree_names(body, len(sha) // 2) if kind == "tree" else decoded_text(body)
        if text is not None:
            surfaces.append(Surface(f"git object {sha[:12]} ({kind}, in no shown commit)", text))
    return surfaces


def _tree_names(body: bytes, id_bytes: int) -> str:
    # Raw tree entries: "<mode> <name>\0" then the entry's id (20 bytes, 32 with SHA-256).
    names, at = [], 0
    while at < len(body):
        name_end = body.index(b"\x00", at)
        names.append(body[at:name_end].split(b" ", 1)[1].decode(errors="replace"))
        at = name_end + 1 + id_bytes
    return "\n".join(names)


def decoded_text(data: bytes) -> str | None:
    """`data` as text, or None when it looks binary (a NUL early on) or is over 2 MB."""
    if len(data) > _MAX_TEXT_BYTES or b"\x00" in data[:_BINARY_PROBE_BYTES]:
        return None
    return data.decode(errors="replace")


def git_dir_surfaces(root: Path) -> list[Surface]:
    """Each text file under `.git` outside the object store, and the index's paths."""
    git_dir = root / ".git"
    if not git_dir.is_dir():
        return []
    surfaces = []
    for folder, dirs, names in os.walk(git_dir):
        here = Path(folder)
        if here == git_dir:
            dirs[:] = [d for d in dirs if d != "objects"]
        dirs.sort()
        for name in sorted(names):
            path = here / name
            if path == git_dir / "index":
                continue
            relative = path.relative_to(root).as_posix()
            try:  # from the workspace: a linked `.git` is refused too
                text = decoded_text(read_untrusted(root, relative, cap=_MAX_TEXT_BYTES))
            except UntrustedFileRefused:  # a link, FIFO or device, or over the cap
                continue
            if text is not None and text.strip():
                surfaces.append(Surface(f"git dir {path.relative_to(git_dir).as_posix()}", text))
    surfaces.append(Surface("git index", git_text(root, "ls-files", "--stage")))
    return surfaces


def git_text(root: Path, *args: str) -> str:
    """git's stdout in the workspace (paths unquoted); `WorkspaceUnreadable` on failure."""
    try:
        return git(root, *args, config={"core.quotepath": "off"}, timeout_s=_GIT_TIMEOUT_S)
    except GitError as error:
        raise WorkspaceUnreadable(str(error)) from error
