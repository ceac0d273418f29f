"""The submission diff: the whole working tree against the base commit, minus `.oncall/`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from sreforge_runner import exclude_sentinel_dir, head_commit, workspace_diff

Git = Callable[..., str]


def _touched(diff: str) -> list[str]:
    return sorted(
        line.split(" b/", 1)[1] for line in diff.splitlines() if line.startswith("diff --git")
    )


def test_committed_staged_unstaged_and_new_files_are_all_in_the_diff(
    tiny_repo: Path, run_git: Git
) -> None:
    """What the agent leaves in the tree ships, however far it got with git."""
    base = head_commit(tiny_repo)
    (tiny_repo / "committed.py").write_text("A = 1\n")
    run_git(tiny_repo, "add", "committed.py")
    run_git(tiny_repo, "commit", "-q", "-m", "Add committed")
    (tiny_repo / "staged.py").write_text("B = 2\n")
    run_git(tiny_repo, "add", "staged.py")
    (tiny_repo / "app.py").write_text("TTL = 60\n")  # unstaged edit of a tracked file
    (tiny_repo / "pkg").mkdir()
    (tiny_repo / "pkg" / "new.py").write_text("C = 3\n")  # untracked
    (tiny_repo / "README.md").unlink()  # deleted
    diff = workspace_diff(tiny_repo, base)
    assert _touched(diff) == ["README.md", "app.py", "committed.py", "pkg/new.py", "staged.py"]
    assert "+TTL = 60" in diff
    assert "deleted file mode" in diff


def test_the_sentinel_dir_is_never_in_the_diff(tiny_repo: Path, run_git: Git) -> None:
    """`.oncall/` stays out, even when the agent force-adds and commits it."""
    base = head_commit(tiny_repo)
    exclude_sentinel_dir(tiny_repo)
    (tiny_repo / ".oncall").mkdir()
    (tiny_repo / ".oncall" / "submitted").write_text("{}")
    assert workspace_diff(tiny_repo, base) == ""
    run_git(tiny_repo, "add", "-f", ".oncall")
    run_git(tiny_repo, "commit", "-q", "-m", "oops")
    assert workspace_diff(tiny_repo, base) == ""


def test_the_diff_applies_to_the_base_and_leaves_the_agents_index_alone(
    tiny_repo: Path, run_git: Git, tmp_path: Path
) -> None:
    """`git apply` of the diff on a clean base checkout reproduces the tree."""
    base = head_commit(tiny_repo)
    (tiny_repo / "app.py").write_text("TTL = 60\n")
    (tiny_repo / "logo.bin").write_bytes(bytes(range(256)))
    status_before = run_git(tiny_repo, "status", "--porcelain")
    diff = workspace_diff(tiny_repo, base)
    assert run_git(tiny_repo, "status", "--porcelain") == status_before
    clone = tmp_path / "clone"
    run_git(tmp_path, "clone", "-q", str(tiny_repo), str(clone))
    run_git(clone, "checkout", "-q", base)
    subprocess.run(["git", "apply", "-"], cwd=clone, input=diff.encode(), check=True)
    assert (clone / "app.py").read_text() == "TTL = 60\n"
    assert (clone / "logo.bin").read_bytes() == bytes(range(256))


def test_no_change_means_an_empty_diff(tiny_repo: Path) -> None:
    """An untouched workspace diffs to nothing."""
    assert workspace_diff(tiny_repo, head_commit(tiny_repo)) == ""


def test_the_agents_filters_hooks_and_fsmonitor_never_run_when_the_diff_is_taken(
    tiny_repo: Path, run_git: Git, tmp_path: Path
) -> None:
    """The agent's .git/config names a clean/process filter (its .gitattributes selects it),
    an fsmonitor and a hooks path: taking the diff on the runner's side runs none of them,
    and the diff still holds the change as written."""
    base = head_commit(tiny_repo)
    planted = tmp_path / "planted"
    program = tmp_path / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {planted}\ncat\n')
    program.chmod(0o755)
    hooks = tiny_repo / ".git" / "hooks"
    (hooks / "post-index-change").write_text(program.read_text())
    (hooks / "post-index-change").chmod(0o755)
    for key, value in (
        ("filter.Ev.il.clean", str(program)),
        ("filter.Ev.il.process", str(program)),
        ("filter.Ev.il.required", "true"),
        ("core.fsmonitor", str(program)),
        ("core.hooksPath", str(hooks)),
    ):
        run_git(tiny_repo, "config", key, value)
    (tiny_repo / ".gitattributes").write_text("* filter=Ev.il\n")
    (tiny_repo / "app.py").write_text("TTL = 61\n")
    diff = workspace_diff(tiny_repo, base)
    assert not planted.exists(), planted.read_text()
    assert "+TTL = 61" in diff
