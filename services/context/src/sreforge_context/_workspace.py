"""Everything in a git workspace the agent can read, as surfaces for the leak check.

The tree (file names and text contents), every commit reachable from any ref or
reflog (`git log -p --all --reflog`: messages, author and committer identities,
diffs, merges and stashes against their first parent, notes), the ref names with
their tag messages, every object no such commit shows (dangling, unreachable, a
tagged blob: `_gitstore`), and the `.git` folder's own text files. Only the
runner's sentinel directory is left out. Files are read through
`sreforge_confine.read_untrusted` (no link followed at any component, a FIFO or
device skipped, capped); a link is shown as its target's text.
"""

from __future__ import annotations

import os
from pathlib import Path

from sreforge_confine import UntrustedFileRefused, read_untrusted
from sreforge_contracts import SUBMISSION_DIR, Surface

from sreforge_context._errors import WorkspaceUnreadable
from sreforge_context._gitstore import (
    decoded_text,
    git_dir_surfaces,
    git_text,
    stray_object_surfaces,
)

__all__ = ["workspace_surfaces"]
"""The runner's submit sentinel directory; created after the check, never committed."""

_MAX_FILE_BYTES = 2_000_000
_COMMIT_MARK = "\x00commit "
# Tag messages are their own text; a branch's "contents" would repeat a commit message.
_REF_FORMAT = "--format=%(refname)%(if:equals=tag)%(objecttype)%(then) %(contents)%(end)"


def workspace_surfaces(path: Path) -> list[Surface]:
    """The workspace's file names, text files, history, refs and config as surfaces."""
    if not path.is_dir():
        raise WorkspaceUnreadable(f"workspace {path} does not exist")
    files = _tree_files(path)
    surfaces = [Surface("workspace file names", "\n".join(files))]
    surfaces += [s for s in (_file_surface(path, name) for name in files) if s is not None]
    history = _history_surfaces(path)
    surfaces += [surface for _, surface in history]
    surfaces.append(Surface("git refs", git_text(path, "for-each-ref", _REF_FORMAT)))
    surfaces += stray_object_surfaces(path, [sha for sha, _ in history])
    surfaces += git_dir_surfaces(path)
    return surfaces


def _tree_files(root: Path) -> list[str]:
    found = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d not in (".git", SUBMISSION_DIR)]
        dirs.sort()
        found += [(here / name).relative_to(root).as_posix() for name in sorted(names)]
    return found


def _file_surface(root: Path, name: str) -> Surface | None:
    file = root / name
    try:
        if file.is_symlink():  # its target is readable text (`readlink`), not followed
            return Surface(f"workspace file {name}", f"-> {os.readlink(file)}")
        data = read_untrusted(root, name, cap=_MAX_FILE_BYTES)
    except (OSError, UntrustedFileRefused):  # over the cap, a FIFO, a device: no text
        return None
    text = decoded_text(data)
    return None if text is None else Surface(f"workspace file {name}", text)


def _history_surfaces(root: Path) -> list[tuple[str, Surface]]:
    log = git_text(
        root,
        "log",
        "--all",
        "--reflog",
        "-p",
        "--diff-merges=first-parent",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        f"--format={_COMMIT_MARK.replace(chr(0), '%x00')}%H%nAuthor: %an <%ae>%n"
        "Committer: %cn <%ce>%n%n%B",
    )
    surfaces = []
    for chunk in log.split(_COMMIT_MARK)[1:]:
        sha, _, body = chunk.partition("\n")
        surfaces.append((sha, Surface(f"git commit {sha[:12]}", body)))
    return surfaces
