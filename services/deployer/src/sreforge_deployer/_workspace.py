"""The run's git workspace: realistic history, then the fault per delivery mode."""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from itertools import pairwise
from pathlib import Path

from sreforge_git import GitError, git

from sreforge_deployer._errors import WorkspaceError
from sreforge_deployer._history import DEFAULT_HISTORY, SETUP_BAKED_TAIL, Author, HistoryCommit

__all__ = ["NO_REFLOG", "Workspace", "identity_env", "source_files"]

NO_REFLOG = {"core.logAllRefUpdates": "false"}
"""`git -c` settings for every command on a run repo: no reflog is kept."""

_IGNORED_PARTS = {
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".venv",
    ".git",
}
_IGNORED_SUFFIXES = (".pyc", ".pyo", ".db", ".sqlite", ".sqlite3", ".egg-info")
# Spacing of the commits one recent deploy mints, ending at the arm time.
_RECENT_SPACING = timedelta(minutes=9)


def source_files(source: Path) -> list[str]:
    """POSIX paths of the files under `source` that belong in the repo, sorted."""
    files = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or _IGNORED_PARTS & set(relative.parts):
            continue
        if relative.name.endswith(_IGNORED_SUFFIXES):
            continue
        files.append(relative.as_posix())
    return files


class Workspace:
    """A git repo the app runs from and the agent works in."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def build(
        cls,
        source: Path,
        dest: Path,
        *,
        history: Sequence[HistoryCommit] = DEFAULT_HISTORY,
        baked_patches: Sequence[Path] = (),
    ) -> Workspace:
        """Create `dest` as a repo whose history adds `source`; bake patches in if given."""
        if dest.exists():
            raise WorkspaceError(f"workspace {dest} already exists")
        dest.mkdir(parents=True)
        workspace = cls(dest)
        workspace.git("init", "-q", "-b", "main")
        pending = source_files(source)
        if not pending:
            raise WorkspaceError(f"no source files under {source}")
        split = len(history) - SETUP_BAKED_TAIL if baked_patches else len(history)
        for index, commit in enumerate(history):
            if index == split:
                between = _midpoint(history[index - 1].date, commit.date)
                workspace.apply_mailbox(baked_patches, [between] * len(baked_patches))
            is_last = index == len(history) - 1
            pending = workspace._commit_files(source, pending, commit, sweep=is_last)
        return workspace

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run git in the workspace; raise `WorkspaceError` with its output on failure."""
        try:
            return git(self.path, *args, env=env, config=NO_REFLOG).strip()
        except GitError as error:
            raise WorkspaceError(str(error)) from error

    def head(self) -> str:
        """The current commit id."""
        return self.git("rev-parse", "HEAD")

    def apply_mailbox(self, patches: Sequence[Path], dates: Sequence[str]) -> list[str]:
        """`git am` each patch in order, dating commit i at `dates[i]`; return the new ids.

        A `git am` cut short (its deployer killed mid-arm) is undone first: the lock files
        its git left (index, HEAD, a branch ref) are removed (arming is the only git at work
        in the workspace then) and the am aborted, which restores the original HEAD, so
        arming can be repeated.
        """
        if patches:
            self._undo_cut_short(identity_env(self._patch_author(patches[0]), dates[0]))
        created = []
        for patch, date in zip(patches, dates, strict=True):
            committer = self._patch_author(patch)
            stamp = identity_env(committer, date)
            try:
                self.git("am", "-q", "--committer-date-is-author-date", str(patch), env=stamp)
            except WorkspaceError:
                self.git("am", "--abort", env=stamp)
                raise
            author = self._head_author()
            self.git(
                "commit",
                "-q",
                "--amend",
                "--no-edit",
                f"--date={date}",
                env=identity_env(author, date),
            )
            created.append(self.head())
        return created

    def own_git_dir(self) -> Path:
        """The workspace's `.git`; `WorkspaceError` unless it is a plain folder (not a link,
        not a `gitdir:` file pointing elsewhere)."""
        git_dir = self.path / ".git"
        if git_dir.is_symlink() or not git_dir.is_dir():
            raise WorkspaceError(f"workspace {self.path}: .git is not a folder of the run's own")
        return git_dir

    def clear_locks(self) -> None:
        """Remove the lock files a killed git left (index, HEAD, refs); only call it when
        no other git can be at work in the workspace (arming, the merge after the agent)."""
        try:
            for lock in self.own_git_dir().rglob("*.lock"):  # rglob does not go through links
                if lock.is_symlink() or lock.is_file():  # a folder is no lock of git's
                    lock.unlink(missing_ok=True)
        except OSError as error:
            why = f"workspace {self.path}: cannot clear git locks: {error}"
            raise WorkspaceError(why) from error

    def _undo_cut_short(self, env: dict[str, str]) -> None:
        self.clear_locks()
        if (self.path / self.git("rev-parse", "--git-path", "rebase-apply")).exists():
            self.git("am", "--abort", env=env)

    def deliver_recent(self, patches: Sequence[Path], now: datetime | None = None) -> list[str]:
        """Apply patches as a recent deploy: the last one dated `now` (the real time)."""
        now = now or datetime.now(UTC).astimezone()
        count = len(patches)
        dates = [(now - _RECENT_SPACING * (count - 1 - i)).isoformat() for i in range(count)]
        return self.apply_mailbox(patches, dates)

    def deliver_series(self, patches: Sequence[Path], now: datetime | None = None) -> list[str]:
        """Apply patches as deploys of their own: spaced as their `Date:` headers are, the
        last dated `now`, the first after the current HEAD (multi-commit).

        A series dated days apart lands days apart, ending at the arm time. Dates that do
        not increase along the series, or a spread reaching back past HEAD, fall back to
        `deliver_recent`'s spacing, so the history always reads in order.
        """
        now = now or datetime.now(UTC).astimezone()
        stamped = [self._patch_date(patch) for patch in patches]
        spread = [stamped[-1] - when for when in stamped] if stamped else []
        head = datetime.fromisoformat(self.git("log", "-1", "--format=%cI"))
        ordered = all(a > b for a, b in pairwise(spread))
        if not ordered or (spread and now - spread[0] <= head):
            return self.deliver_recent(patches, now)
        return self.apply_mailbox(patches, [(now - back).isoformat() for back in spread])

    def apply_diff(self, patch: Path, message: str, author: Author) -> str:
        """`git apply` a plain diff and commit it as `author` now; return the commit id."""
        self.git("apply", "--index", str(patch.resolve()))
        date = datetime.now(UTC).astimezone().isoformat()
        self.git("commit", "-q", "-m", message, env=identity_env(author, date))
        return self.head()

    def reset_to(self, commit: str) -> None:
        """Hard-reset the tree to `commit` and drop untracked files."""
        self.git("reset", "-q", "--hard", commit)
        self.git("clean", "-q", "-fdx")

    def _commit_files(
        self, source: Path, pending: list[str], commit: HistoryCommit, *, sweep: bool
    ) -> list[str]:
        chosen = [
            path
            for path in pending
            if sweep or any(fnmatch.fnmatch(path, pattern) for pattern in commit.patterns)
        ]
        if not chosen:
            return pending
        for relative in chosen:
            target = self.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / relative, target)
            shutil.copymode(source / relative, target)
        self.git("add", "--", *chosen)
        stamp = identity_env(commit.author, commit.date)
        self.git("commit", "-q", "-m", commit.message, env=stamp)
        return [path for path in pending if path not in chosen]

    def _patch_author(self, patch: Path) -> Author:
        try:
            text = patch.read_text(errors="replace")
        except FileNotFoundError as error:
            raise WorkspaceError(f"patch {patch} not found") from error
        for line in text.splitlines():
            if line.startswith("From: ") and "<" in line:
                name, _, email = line.removeprefix("From: ").partition("<")
                return Author(name.strip().strip('"'), email.rstrip(">").strip())
        raise WorkspaceError(f"patch {patch} has no `From: Name <email>` header (git format-patch)")

    def _patch_date(self, patch: Path) -> datetime:
        try:
            text = patch.read_text(errors="replace")
        except FileNotFoundError as error:
            raise WorkspaceError(f"patch {patch} not found") from error
        for line in text.splitlines():
            if line.startswith("Date: "):
                try:
                    return parsedate_to_datetime(line.removeprefix("Date: "))
                except (TypeError, ValueError):
                    break
        raise WorkspaceError(f"patch {patch} has no RFC 2822 `Date:` header (git format-patch)")

    def _head_author(self) -> Author:
        name, email = self.git("log", "-1", "--format=%an%x00%ae").split("\x00")
        return Author(name, email)


def identity_env(author: Author, date: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": author.name,
        "GIT_COMMITTER_EMAIL": author.email,
        "GIT_COMMITTER_DATE": date,
    }


def _midpoint(earlier: str, later: str) -> str:
    start = datetime.fromisoformat(earlier)
    end = datetime.fromisoformat(later)
    return (start + (end - start) / 2).replace(microsecond=0).isoformat()
