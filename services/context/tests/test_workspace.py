"""The guard over a git workspace: tree, file names, history, identities, refs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from sreforge_context import Tells, find_leaks, workspace_surfaces

GitRepo = Callable[..., Path]
Git = Callable[..., str]
TELLS = Tells.for_run("checkout-slow", "ShopCheckoutLatencyHigh")


def _where(repo: Path) -> list[tuple[str, str]]:
    return [(leak.what, leak.where) for leak in find_leaks(workspace_surfaces(repo), TELLS)]


def test_a_clean_tree_passes(git_repo: GitRepo, clean_files: dict[str, str]) -> None:
    """A product tree with ordinary words (`Defaults`, `resolution`) has no tells."""
    assert _where(git_repo(clean_files)) == []


def test_a_tell_in_a_file_is_caught(git_repo: GitRepo, clean_files: dict[str, str]) -> None:
    """File contents are read (the working tree, not only what is committed)."""
    repo = git_repo(clean_files)
    (repo / "shop" / "notes.txt").write_text("remember the oracle\n")
    assert _where(repo) == [("harness word 'oracle'", "workspace file shop/notes.txt")]


def test_a_tell_in_a_file_name_is_caught(git_repo: GitRepo, clean_files: dict[str, str]) -> None:
    """A path is readable even when the file is empty."""
    repo = git_repo(clean_files)
    (repo / "inject_delay.py").write_text("")
    assert _where(repo) == [("harness word 'inject'", "workspace file names")]


def test_a_tell_only_in_history_is_caught(
    git_repo: GitRepo, clean_files: dict[str, str], run_git: Git
) -> None:
    """A file added then deleted still shows in `git log -p`."""
    repo = git_repo(clean_files)
    (repo / "hint.md").write_text("The alert is ShopCheckoutLatencyHigh\n")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "Add notes")
    run_git(repo, "rm", "-q", "hint.md")
    run_git(repo, "commit", "-q", "-m", "Drop notes")
    found = _where(repo)
    assert len(found) == 2, found  # the commit that added it and the one that removed it
    assert all(what == "eval-only alert_to_clear" for what, _ in found)
    assert all(where.startswith("git commit ") for _, where in found)


def test_a_tell_in_a_commit_message_is_caught(
    git_repo: GitRepo, clean_files: dict[str, str], run_git: Git
) -> None:
    """Commit messages are agent-visible."""
    repo = git_repo(clean_files)
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "Prepare checkout-slow run")
    found = _where(repo)
    assert {what for what, _ in found} == {"scenario id"}
    assert {where.split(" ")[1] for _, where in found} == {"commit", "dir"}  # + reflog, EDITMSG


def test_a_tell_in_an_author_name_is_caught(
    git_repo: GitRepo, clean_files: dict[str, str], run_git: Git
) -> None:
    """Author and committer identities are agent-visible."""
    repo = git_repo(clean_files)
    bot = {"GIT_AUTHOR_NAME": "Harness Bot", "GIT_AUTHOR_EMAIL": "bot@example.org"}
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "Tidy", env=bot)
    found = _where(repo)
    assert {what for what, _ in found} == {"harness word 'harness'"}
    assert any(where.startswith("git commit ") for _, where in found)


@pytest.mark.parametrize("kind", ["branch", "tag"])
def test_a_tell_in_a_ref_name_is_caught(
    git_repo: GitRepo, clean_files: dict[str, str], kind: str, run_git: Git
) -> None:
    """Branch and tag names (`git branch -a`, `git tag`) are agent-visible."""
    repo = git_repo(clean_files)
    run_git(repo, kind, "solution-v1")
    assert ("harness word 'solution'", "git refs") in _where(repo)


def test_an_annotated_tag_message_is_caught(
    git_repo: GitRepo, clean_files: dict[str, str], run_git: Git
) -> None:
    """Tag messages are agent-visible too."""
    repo = git_repo(clean_files)
    run_git(repo, "tag", "-a", "v1.0", "-m", "benchmark baseline")
    assert ("harness word 'benchmark'", "git refs") in _where(repo)


def test_the_submit_sentinel_dir_is_not_scanned(
    git_repo: GitRepo, clean_files: dict[str, str]
) -> None:
    """`.oncall/` is the runner's own (written after the check); it is not a leak."""
    repo = git_repo(clean_files)
    (repo / ".oncall").mkdir()
    (repo / ".oncall" / "submitted").write_text("{}")
    assert _where(repo) == []


def test_a_symlink_target_is_read_not_followed(
    git_repo: GitRepo, clean_files: dict[str, str], tmp_path: Path
) -> None:
    """`readlink` shows where a link points, e.g. at a folder outside the workspace."""
    repo = git_repo(clean_files)
    (repo / "docs").symlink_to(tmp_path / "solution-notes")
    assert _where(repo) == [("harness word 'solution'", "workspace file docs")]


def test_binary_files_are_skipped(git_repo: GitRepo, clean_files: dict[str, str]) -> None:
    """Compiled or binary blobs are not decoded as text."""
    repo = git_repo(clean_files)
    (repo / "cache.bin").write_bytes(b"\x00\x01oracle\x00")
    assert _where(repo) == []


def test_the_real_bookshelf_workspace_is_clean(bookshelf_workspace: Path) -> None:
    """The workspace the deployer builds (history + the delivered commit) has no tells."""
    tells = Tells.for_run("latency-cache-stampede", "BookshelfApiLatencyP99High")
    leaks = find_leaks(workspace_surfaces(bookshelf_workspace), tells)
    assert leaks == [], "\n".join(str(leak) for leak in leaks)


@pytest.mark.timeout(20)
def test_a_fifo_or_a_linked_folder_neither_blocks_nor_is_read_through(
    git_repo: GitRepo, clean_files: dict[str, str], tmp_path: Path
) -> None:
    """A FIFO in the tree or in `.git` would hang a plain read; a file reached through
    a linked folder is not the workspace's. Both are skipped, at once."""
    repo = git_repo(clean_files)
    os.mkfifo(repo / "pipe")
    os.mkfifo(repo / ".git" / "pipe")
    outside = tmp_path / "neutral"
    outside.mkdir()
    (outside / "notes.txt").write_text("the oracle's notes\n")
    (repo / ".git" / "linked").symlink_to(outside)
    assert _where(repo) == []
    (repo / ".git" / "hooks-notes.txt").write_text("the oracle's notes\n")
    assert _where(repo) == [("harness word 'oracle'", "git dir hooks-notes.txt")]
