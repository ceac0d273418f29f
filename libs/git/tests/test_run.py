"""sreforge-git: the operator's config never reaches the run's repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from sreforge_git import GitError, GitFailed, git, run_git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty repository with a local identity."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Local Person")
    git(root, "config", "user.email", "local@example.invalid")
    return root


def test_the_operators_global_config_and_git_env_are_ignored(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global config file and inherited GIT_* identity variables do not leak into commits."""
    global_config = tmp_path / "operator.gitconfig"
    global_config.write_text("[user]\n\tname = Operator Name\n\temail = op@corp.invalid\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Inherited Author")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == (
        "Local Person <local@example.invalid>"
    )


def test_a_failed_command_names_itself_the_folder_and_gits_message(repo: Path) -> None:
    """The checked form raises GitFailed carrying the result; the unchecked one returns it."""
    with pytest.raises(GitFailed, match=r"git rev-parse in .*repo failed \(exit 128\)") as caught:
        git(repo, "rev-parse", "--verify", "no-such-ref")
    assert caught.value.result.returncode == 128
    assert not run_git(repo, "rev-parse", "--verify", "no-such-ref").ok


def test_a_missing_folder_is_a_git_error(tmp_path: Path) -> None:
    """git that cannot start at all (no such cwd) is a GitError, not an OSError."""
    with pytest.raises(GitError, match="no-such-dir"):
        run_git(tmp_path / "no-such-dir", "status")


def test_undecodable_output_is_replaced_not_raised(repo: Path) -> None:
    """A file with invalid UTF-8 shows in `git show` output without a decode error."""
    (repo / "bin.txt").write_bytes(b"ok \xff\xfe bytes\n")
    git(repo, "add", "bin.txt")
    git(repo, "commit", "-q", "-m", "bytes")
    assert "\ufffd" in git(repo, "show", "HEAD:bin.txt")


def test_config_pairs_are_passed_with_dash_c(repo: Path) -> None:
    """`config={...}` becomes `-c key=value` for that one command."""
    shown = git(repo, "config", "--get", "core.quotepath", config={"core.quotepath": "off"})
    assert shown.strip() == "off"
