"""`submit` on the agent's PATH: an atomic sentinel, an optional RCA, nothing else."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sreforge_runner import (
    SENTINEL_DIR,
    exclude_sentinel_dir,
    install_submit,
    read_sentinel,
)

Git = Callable[..., str]


def _submit(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "submit"), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_submit_writes_the_sentinel_and_leaves_no_temporary_files(
    tiny_repo: Path, tmp_path: Path
) -> None:
    """The sentinel appears whole (temp file + rename): only final names remain."""
    bin_dir = tmp_path / "bin"
    install_submit(bin_dir, tiny_repo)
    done = _submit(bin_dir, tiny_repo)
    assert done.returncode == 0, done.stderr
    folder = tiny_repo / SENTINEL_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["submitted"]
    data = json.loads((folder / "submitted").read_text())
    assert data["rca"] is False
    sentinel = read_sentinel(tiny_repo)
    assert sentinel is not None
    assert sentinel.rca is None
    assert sentinel.submitted_at == data["submitted_at"]


def test_submit_with_rca_copies_the_file(tiny_repo: Path, tmp_path: Path) -> None:
    """`submit --rca FILE` (relative to the caller's cwd) attaches the write-up."""
    bin_dir = tmp_path / "bin"
    install_submit(bin_dir, tiny_repo)
    (tiny_repo / "notes").mkdir()
    (tiny_repo / "notes" / "why.md").write_text("The cache was per request.\n")
    done = _submit(bin_dir, tiny_repo / "notes", "--rca", "why.md")
    assert done.returncode == 0, done.stderr
    sentinel = read_sentinel(tiny_repo)
    assert sentinel is not None
    assert sentinel.rca == "The cache was per request.\n"
    assert sorted(p.name for p in (tiny_repo / SENTINEL_DIR).iterdir()) == ["rca.md", "submitted"]


def test_submit_refuses_a_missing_rca_and_writes_nothing(tiny_repo: Path, tmp_path: Path) -> None:
    """A typo in the RCA path is reported, not half-submitted."""
    bin_dir = tmp_path / "bin"
    install_submit(bin_dir, tiny_repo)
    done = _submit(bin_dir, tiny_repo, "--rca", "nope.md")
    assert done.returncode == 2
    assert "no such file: nope.md" in done.stderr
    assert read_sentinel(tiny_repo) is None


def test_a_half_written_sentinel_is_not_a_submission(tiny_repo: Path) -> None:
    """Only the renamed final file counts; a temp file or garbage reads as not submitted."""
    folder = tiny_repo / SENTINEL_DIR
    folder.mkdir()
    (folder / ".submitted.123").write_text('{"submitted_at": "x", "rca": false}')
    assert read_sentinel(tiny_repo) is None
    (folder / "submitted").write_text('{"submitted_at": ')
    assert read_sentinel(tiny_repo) is None


def test_the_sentinel_dir_is_git_ignored_once(tiny_repo: Path, run_git: Git) -> None:
    """`.git/info/exclude` hides `.oncall/` from `git status`; the line is added once."""
    exclude_sentinel_dir(tiny_repo)
    exclude_sentinel_dir(tiny_repo)
    (tiny_repo / SENTINEL_DIR).mkdir()
    (tiny_repo / SENTINEL_DIR / "submitted").write_text("{}")
    assert run_git(tiny_repo, "status", "--porcelain") == ""
    exclude = (tiny_repo / ".git" / "info" / "exclude").read_text()
    assert exclude.splitlines().count("/.oncall/") == 1


def test_a_hostile_sentinel_reads_as_not_submitted_instead_of_crashing(tiny_repo: Path) -> None:
    """The agent can overwrite the sentinel: 100 000 levels of nesting (RecursionError in
    json.loads, which failed the run as a harness `error`) or megabytes of it."""
    folder = tiny_repo / SENTINEL_DIR
    folder.mkdir()
    (folder / "submitted").write_text("[" * 100_000 + "]" * 100_000)
    assert read_sentinel(tiny_repo) is None
    (folder / "submitted").write_text(json.dumps({"submitted_at": "x" * 5_000_000}))
    assert read_sentinel(tiny_repo) is None


def _submitted(folder: Path, rca: bool) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "submitted").write_text(json.dumps({"submitted_at": "t", "rca": rca}))


def test_a_symlinked_rca_is_no_rca_and_nothing_of_its_target_is_read(
    tiny_repo: Path, tmp_path: Path, log_events: Callable[[], list[dict[str, Any]]]
) -> None:
    """The leak found by a cheating agent: `rca.md` → the engine home's bus credential."""
    secret = tmp_path / "engine-home" / "operator.json"
    secret.parent.mkdir()
    secret.write_text("OPERATOR-SEED-VALUE")
    folder = tiny_repo / SENTINEL_DIR
    _submitted(folder, rca=True)
    (folder / "rca.md").symlink_to(secret)
    sentinel = read_sentinel(tiny_repo)
    assert sentinel is not None
    assert sentinel.rca is None
    assert [entry["reason"] for entry in log_events()] == ["rca.md is a symbolic link"]


def test_a_symlinked_sentinel_is_no_submission(tiny_repo: Path) -> None:
    """A sentinel `submit` did not write (a link to any JSON file) does not submit."""
    elsewhere = tiny_repo / "notes.json"
    elsewhere.write_text(json.dumps({"submitted_at": "t", "rca": False}))
    folder = tiny_repo / SENTINEL_DIR
    folder.mkdir()
    (folder / "submitted").symlink_to(elsewhere)
    assert read_sentinel(tiny_repo) is None


def test_a_symlinked_submission_folder_is_no_submission(tiny_repo: Path, tmp_path: Path) -> None:
    """`.oncall` itself linked elsewhere: not walked through."""
    outside = tmp_path / "outside"
    _submitted(outside, rca=True)
    (outside / "rca.md").write_text("not the agent's")
    (tiny_repo / SENTINEL_DIR).symlink_to(outside)
    assert read_sentinel(tiny_repo) is None


@pytest.mark.timeout(10)
def test_a_fifo_rca_returns_promptly_as_no_rca(tiny_repo: Path) -> None:
    """A FIFO with no writer would hang the runner's read; it is no RCA instead."""
    folder = tiny_repo / SENTINEL_DIR
    _submitted(folder, rca=True)
    os.mkfifo(folder / "rca.md")
    sentinel = read_sentinel(tiny_repo)
    assert sentinel is not None
    assert sentinel.rca is None


def test_a_symlinked_exclude_file_is_replaced_not_written_through(
    tiny_repo: Path, tmp_path: Path
) -> None:
    """`.git/info/exclude` → a host file: the host file is neither read nor changed."""
    host_file = tmp_path / "host.txt"
    host_file.write_text("host\n")
    exclude = tiny_repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(host_file)
    exclude_sentinel_dir(tiny_repo)
    assert host_file.read_text() == "host\n"
    assert not exclude.is_symlink()
    assert exclude.read_text() == "/.oncall/\n"
