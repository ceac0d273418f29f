"""The guard over what a repo holds beyond `git log`: notes, stash, reflog, stray objects."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sreforge_context import Tells, find_leaks, workspace_surfaces

GitRepo = Callable[..., Path]
Git = Callable[..., str]
TELLS = Tells.for_run("checkout-slow", "ShopCheckoutLatencyHigh")


def _wheres(repo: Path, what: str) -> set[str]:
    return {leak.where for leak in find_leaks(workspace_surfaces(repo), TELLS) if leak.what == what}


@pytest.fixture
def repo(git_repo: GitRepo, clean_files: dict[str, str]) -> Path:
    """A clean committed workspace."""
    return git_repo(clean_files)


def test_a_note_on_a_commit_is_caught(repo: Path, run_git: Git) -> None:
    """`git notes show` / `git log --notes` read refs/notes/*: a note is agent-visible."""
    run_git(repo, "notes", "add", "-m", "the oracle waits on this one")
    assert any(w.startswith("git commit ") for w in _wheres(repo, "harness word 'oracle'"))


def test_a_note_under_a_custom_notes_ref_is_caught(repo: Path, run_git: Git) -> None:
    """Notes under any `refs/notes/<name>`, not only the default ref."""
    run_git(repo, "notes", "--ref", "review", "add", "-m", "solution is in the cache layer")
    assert _wheres(repo, "harness word 'solution'")


def test_a_stash_is_caught(repo: Path, run_git: Git) -> None:
    """A stash holds a working-tree change `git stash show -p` prints back."""
    (repo / "shop" / "app.py").write_text("# inject latency here\n")
    run_git(repo, "stash", "-q")
    assert (repo / "shop" / "app.py").read_text().startswith("def checkout")
    assert any(w.startswith("git commit ") for w in _wheres(repo, "harness word 'inject'"))


def test_a_reflog_message_is_caught(repo: Path, run_git: Git) -> None:
    """`git reflog` messages survive the commit they name (here: a reset away commit)."""
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "fault armed")
    run_git(repo, "reset", "-q", "--hard", "HEAD~1")
    found = _wheres(repo, "harness word 'fault'")
    assert "git dir logs/HEAD" in found
    assert any(w.startswith("git commit ") for w in found)  # reachable from the reflog


def test_a_dangling_commit_is_caught(repo: Path, run_git: Git) -> None:
    """An amended-away commit with no reflog is still in the store (`git fsck --lost-found`)."""
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "harness baseline")
    run_git(repo, "commit", "-q", "--allow-empty", "--amend", "-m", "Tidy")
    shutil.rmtree(repo / ".git" / "logs")  # as the deployer's repos: no reflog at all
    found = _wheres(repo, "harness word 'harness'")
    assert found
    assert all(w.startswith("git object ") for w in found), found


def test_a_dangling_blob_is_caught(repo: Path, run_git: Git) -> None:
    """A blob written to the store but in no commit (`git hash-object -w`)."""
    (repo / "tmp.txt").write_text("eval_only: ShopCheckoutLatencyHigh\n")
    run_git(repo, "hash-object", "-w", "tmp.txt")
    (repo / "tmp.txt").unlink()
    found = _wheres(repo, "eval-only alert_to_clear")
    assert len(found) == 1
    assert found.pop().startswith("git object "), found


def test_a_tag_on_a_blob_is_caught(repo: Path, run_git: Git) -> None:
    """`git tag x <blob>`: `git log --all` does not show it, `git show x` does."""
    (repo / "tmp.txt").write_text("the scenario's answer\n")
    blob = run_git(repo, "hash-object", "-w", "tmp.txt").strip()
    (repo / "tmp.txt").unlink()
    run_git(repo, "tag", "answer", blob)
    assert _wheres(repo, "harness word 'scenario'")


@pytest.mark.parametrize(
    "name", ["description", "info/exclude", "hooks/post-checkout", "COMMIT_EDITMSG", "FETCH_HEAD"]
)
def test_a_tell_in_a_git_dir_file_is_caught(repo: Path, name: str) -> None:
    """`.git`'s own text files are readable: description, exclude, hooks, packed-refs…"""
    path = repo / ".git" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write("\n# written by sreforge\n")
    assert f"git dir {name}" in _wheres(repo, "harness word 'sreforge'")


def test_a_staged_file_name_is_caught_from_the_index(repo: Path, run_git: Git) -> None:
    """A path staged then removed from the tree still shows in `git ls-files`."""
    (repo / "fault_notes.txt").write_text("")
    run_git(repo, "add", "fault_notes.txt")
    (repo / "fault_notes.txt").unlink()
    assert "git index" in _wheres(repo, "harness word 'fault'")


def test_git_internals_of_a_clean_repo_are_clean(repo: Path, run_git: Git) -> None:
    """Sample hooks, the default description and exclude file carry no tells."""
    run_git(repo, "commit", "-q", "--allow-empty", "--amend", "-m", "Initial import")
    surfaces = workspace_surfaces(repo)
    assert "git dir description" in {s.where for s in surfaces}
    assert find_leaks(surfaces, TELLS) == []


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_dangling_tree_shows_its_file_names(
    tmp_path: Path, run_git: Git, clean_files: dict[str, str], object_format: str
) -> None:
    """`git write-tree` of a staged path leaves a tree naming it, in either object format."""
    repo = tmp_path / f"repo-{object_format}"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main", f"--object-format={object_format}")
    for name, text in clean_files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "Initial import")
    (repo / "oracle_hook.py").write_text("")
    run_git(repo, "add", "oracle_hook.py")
    run_git(repo, "write-tree")
    run_git(repo, "rm", "-q", "--cached", "oracle_hook.py")
    (repo / "oracle_hook.py").unlink()
    found = _wheres(repo, "harness word 'oracle'")
    assert len(found) == 1
    assert found.pop().endswith("(tree, in no shown commit)")
