"""Host-side reads of the agent's HOME and workspace: no link followed, no FIFO waited on."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sreforge_runner import collect_native, kept_files, seal_logs
from sreforge_runner._openai_rein import _read, _write
from sreforge_runner._sessions import mini_swe_submitted
from sreforge_runner._submit import has_submitted, write_sentinel

SECRET = "OPERATOR-SEED-VALUE"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A host file the agent must not get into the record: the bus credential."""
    path = tmp_path / "engine-home" / "nats" / "operator.json"
    path.parent.mkdir(parents=True)
    path.write_text(f'{{"seed": "{SECRET}"}}\n')
    return path


def _tree_text(folder: Path) -> str:
    return "".join(p.read_text() for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_symlinked_session_file_in_home_is_not_collected(
    tmp_path: Path, secret: Path, log_events: Callable[[], list[dict[str, Any]]]
) -> None:
    """Claude's session glob matching a link to the credential: skipped, and said so."""
    home = tmp_path / "home"
    projects = home / ".claude" / "projects" / "ws"
    projects.mkdir(parents=True)
    (projects / "real.jsonl").write_text('{"said": "hi"}\n')
    (projects / "leak.jsonl").symlink_to(secret)
    into = tmp_path / "agent" / "native"
    copied = collect_native("claude-code", home, into, {})
    assert [found.name for found in copied] == ["native/.claude/projects/ws/real.jsonl"]
    assert SECRET not in _tree_text(tmp_path / "agent")
    assert log_events() == [], "the first look skips a link without opening it"


def test_a_symlinked_folder_on_the_session_path_is_not_walked(tmp_path: Path, secret: Path) -> None:
    """`.codex/sessions` → the engine home: nothing under it is copied."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (secret.parent / "rollout-1.jsonl").write_text(f"{SECRET}\n")
    (home / ".codex" / "sessions").symlink_to(secret.parent)
    assert collect_native("codex", home, tmp_path / "agent" / "native", {}) == []
    assert not (tmp_path / "agent").exists()


@pytest.mark.timeout(10)
def test_a_fifo_session_file_is_not_collected_and_does_not_block(tmp_path: Path) -> None:
    """aider's `session/chat.md` as a FIFO with no writer: skipped at once."""
    home = tmp_path / "home"
    (home / "session").mkdir(parents=True)
    os.mkfifo(home / "session" / "chat.md")
    (home / "session" / "llm.log").write_text("call\n")
    copied = collect_native("aider", home, tmp_path / "agent" / "native", {})
    assert [found.name for found in copied] == ["native/session/llm.log"]


@pytest.mark.timeout(10)
def test_a_linked_or_fifo_trajectory_is_no_submission(tmp_path: Path) -> None:
    """mini-swe-agent's exit counts as `submit` only from its own plain trajectory."""
    home = tmp_path / "home"
    (home / "session").mkdir(parents=True)
    submitted = tmp_path / "elsewhere.json"
    submitted.write_text('{"info": {"exit_status": "Submitted"}}')
    (home / "session" / "traj.json").symlink_to(submitted)
    assert not mini_swe_submitted(home)
    (home / "session" / "traj.json").unlink()
    os.mkfifo(home / "session" / "traj.json")
    assert not mini_swe_submitted(home)


def test_kept_files_and_sealing_skip_what_is_not_a_plain_file(
    tmp_path: Path, secret: Path, log_events: Callable[[], list[dict[str, Any]]]
) -> None:
    """A link in the agent folder is neither sealed in place nor listed for the recorder."""
    root = tmp_path / "agent"
    (root / "native" / "session").mkdir(parents=True)
    (root / "output.log").symlink_to(secret)
    (root / "native" / "session" / "traj.json").symlink_to(secret)
    (root / "stream.jsonl").write_text('{"stream": "stdout", "text": "ok"}\n')
    sealed = seal_logs(root, {})
    assert [found.name for found in sealed] == ["stream.jsonl"]
    assert [entry["reason"] for entry in log_events()] == ["output.log is a symbolic link"]
    assert kept_files(root) == ("stream.jsonl",)
    assert SECRET in secret.read_text(), "the link's target is untouched"


def test_the_openai_tools_neither_read_nor_write_through_a_link(
    tmp_path: Path, secret: Path
) -> None:
    """`read_file`/`write_file` run on the host: a link in the repository is refused."""
    workspace = tmp_path / "workspace"
    (workspace / "app").mkdir(parents=True)
    (workspace / "app" / "main.py").write_text("print('hi')\n")
    (workspace / "key.json").symlink_to(secret)
    (workspace / "linked").symlink_to(secret.parent)
    assert _read(workspace, "app/main.py") == "print('hi')\n"
    assert (
        _read(workspace, "key.json") == "error: cannot read key.json: key.json is a symbolic link"
    )
    assert SECRET not in _read(workspace, "linked/operator.json")
    assert _read(workspace, "../engine-home/nats/operator.json").startswith("error: no such file")
    assert _write(workspace, "linked/operator.json", "x").startswith("error: cannot write")
    assert _write(workspace, "key.json", "replaced\n").startswith("wrote")
    assert SECRET in secret.read_text()
    assert (workspace / "key.json").read_text() == "replaced\n"


def test_the_exit_sentinel_replaces_a_link_and_counts_only_a_plain_file(
    tmp_path: Path, secret: Path
) -> None:
    """An exit-is-submit preset's sentinel is never written through the agent's link."""
    workspace = tmp_path / "workspace"
    (workspace / ".oncall").mkdir(parents=True)
    (workspace / ".oncall" / "submitted").symlink_to(secret)
    assert not has_submitted(workspace)
    write_sentinel(workspace, "2026-01-01T00:00:00Z")
    assert has_submitted(workspace)
    assert SECRET in secret.read_text()
