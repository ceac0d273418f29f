"""The trees the CI gate's test sets run in: copies of a checkout, the hand-off tests put back.

Every set runs in its own copy, so nothing one set's code writes reaches another's tree
or the checkout that is merged.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sreforge_deployer.gate._test_sets import ChangedTests, is_test_path

__all__ = ["copy_tree", "restore_handoff", "tree_entries"]

_SKIP = shutil.ignore_patterns(".git", "__pycache__")


def copy_tree(source: Path, dest: Path) -> None:
    """`source` copied to `dest` without `.git`; symlinks stay links (never followed)."""
    shutil.copytree(source, dest, symlinks=True, ignore=_SKIP)


def tree_entries(root: Path) -> list[str]:
    """Posix paths under `root` of every file and symlink (a linked folder is one entry)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in [*dirs]:
            if (here / name).is_symlink():
                found.append((here / name).relative_to(root).as_posix())
                dirs.remove(name)
        dirs[:] = [name for name in dirs if name not in (".git", "__pycache__")]
        found.extend((here / name).relative_to(root).as_posix() for name in files)
    return sorted(found)


def restore_handoff(tree: Path, base: Path, changed: ChangedTests) -> list[str]:
    """Make `tree`'s test paths exactly the base's (`changed` files excepted).

    Every test path of the submission is removed, then every test path of the base is
    copied in. Returns what could not be restored (a folder the submission made a
    symlink), which makes the hand-off set red.
    """
    for relative in tree_entries(tree):
        if is_test_path(relative) and not changed.keeps(relative):
            _remove(tree / relative)
    _prune_test_dirs(tree)
    complaints: list[str] = []
    for relative in tree_entries(base):
        if not is_test_path(relative) or changed.keeps(relative):
            continue
        blocked = _linked_parent(tree, relative)
        if blocked is not None:
            complaints.append(f"{relative}: not restored, {blocked} is a symlink in the submission")
            continue
        _copy_entry(base / relative, tree / relative)
    return complaints


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def _prune_test_dirs(tree: Path) -> None:
    """Remove folders left empty by the removal, deepest first (git keeps no empty ones)."""
    for folder, _, _ in sorted(os.walk(tree), key=lambda entry: -len(entry[0])):
        path = Path(folder)
        if path != tree and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()


def _linked_parent(tree: Path, relative: str) -> str | None:
    parent = tree
    for part in Path(relative).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            return parent.relative_to(tree).as_posix()
    return None


def _copy_entry(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        os.symlink(os.readlink(source), dest)
    else:
        shutil.copy2(source, dest)
