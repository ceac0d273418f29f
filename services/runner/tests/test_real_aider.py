"""The real aider, as shipped (`agents/aider.toml`), against the replay model.

The CLI runs in bubblewrap; its model calls go through the runner's model proxy to a
replay server (the test double for the hosted API) playing `conversations.aider`.
Set `SREFORGE_TEST_AIDER_EXECUTABLE` to a venv's `bin/aider` (`pip install
aider-chat==0.86.2`); without it the test skips.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from realcli import AGENTS, changed_lines, drive_shipped, venv_cli
from replay.conversations import aider
from sreforge_contracts import OperationalReadiness, ResolvedExecutionContext
from sreforge_runner import (
    TRANSCRIPT_FILE,
    Budgets,
    CliAgentRein,
    HostSandbox,
    RunnerSettings,
    drive,
    head_commit,
    load_profile,
    read_sentinel,
    workspace_diff,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

KEY = "sk-real-test-key-aider-0123456789"
UNREACHABLE = (
    "githubusercontent",
    "pypi.org",
    "Name or service not known",
    "playwright",
    "Playwright",
    "Scraping",
)
"""What aider prints when it tries the internet (which the sandbox does not have)."""
RUNBOOK = "https://runbooks.example.org/bookshelf/latency"


@pytest.mark.timeout(300)
async def test_the_real_aider_fixes_and_its_exit_submits_through_the_proxy(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aider adds the file it names, applies the SEARCH/REPLACE fix, commits it and exits:
    the fixed diff ships without a `.gitignore` edit or aider's own files, the proxy put
    the (dummy) real key on every call while the CLI only had its session token, it
    neither scraped the page's URL nor fetched prices or updates, and the transcript has
    every call with its tokens and aider's histories."""
    cli = venv_cli("SREFORGE_TEST_AIDER_EXECUTABLE", "aider-chat")
    if not project.real:
        pytest.skip("needs the bookshelf scenario (its fix is the replayed patch)")
    fix = project.fix.read_text()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    page = (project.scenario_dir / "trigger.md").read_text() + f"\nRunbook: {RUNBOOK}\n"
    session = await drive_shipped(
        "aider", cli, aider.fixed(fix), aider.MODEL, project.workspace, settings, page
    )
    run, box, calls, log = session.run, session.box, session.calls, session.log
    print(f"aider session: {session.session_s:.1f} s, {len(calls)} model calls")
    assert run.ok, (run.result.evidence, log[-3000:])
    assert run.result.evidence.confinement == "host-sandboxed"

    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, log[-3000:]  # its clean exit is the submission
    diff = session.diff()
    assert changed_lines(diff) == changed_lines(fix), log[-3000:]
    assert ".gitignore" not in diff
    assert ".aider" not in diff
    assert "Commit " in log  # aider's auto-commit, with the weak model's message

    assert [call.body["model"] for call in calls] == ["gpt-4.1", "gpt-4.1", "gpt-4.1-mini"]
    assert {call.headers.get("authorization") for call in calls} == {f"Bearer {KEY}"}
    assert "just been paged" in json.dumps(calls[0].body["messages"])
    assert "bookshelf/metadata.py" in json.dumps(calls[1].body["messages"][-2:])  # the read
    for call in calls:
        assert KEY not in json.dumps(call.body)
    for needle in UNREACHABLE:
        assert needle not in log, needle

    transcript = json.loads((box.root / TRANSCRIPT_FILE).read_text())
    model_calls = transcript["raw_json"]["model_calls"]
    assert (model_calls["calls"], model_calls["total_tokens"]) == (3, 310)
    assert model_calls["calls_without_usage"] == 0
    assert transcript["submitted"] is True
    assert set(transcript["raw_json"]["native_files"]) == {"session/chat.md", "session/llm.log"}
    for kept in box.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept


async def test_an_aider_session_keeps_its_own_files_out_of_the_diff_and_fetches_no_model_info(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the real CLI (a shell stands in): aider's repo-map cache in the repository is
    git-ignored in the clone only (not via `.gitignore`), so the diff is the code alone,
    and HOME holds a fresh, non-empty model-info cache, so aider does not fetch one."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = (
        "mkdir .aider.tags.cache.v4 && echo sqlite > .aider.tags.cache.v4/cache.db; "
        "printf 'TTL = 60\\n' > tuned.py; "
        'cat "$HOME/.aider/caches/model_prices_and_context_window.json"'
    )
    shipped = load_profile(AGENTS / "aider.toml")
    assert shipped.command is not None
    command = shipped.command.model_copy(update={"executable": "/bin/sh", "args": ("-c", script)})
    profile = shipped.model_copy(
        update={"command": command, "metadata": {"upstream": "http://127.0.0.1:9/v1"}}
    )
    box = HostSandbox(
        project.workspace, project.workspace.parent / "agent", settings, kind="host-sandboxed"
    )
    base = head_commit(project.workspace)
    context = ResolvedExecutionContext(
        request_id="run-aider-files",
        profile=profile,
        readiness=OperationalReadiness(state="unverified"),
        proof_run=True,
    )
    run = await drive(context, CliAgentRein(profile, "# page\n"), box, Budgets(60, 30, 30))
    log = box.log_path.read_text()
    assert run.ok, (run.result.evidence, log)
    assert read_sentinel(project.workspace) is not None
    diff = workspace_diff(project.workspace, base)
    assert "+TTL = 60" in diff.splitlines()
    assert ".aider" not in diff
    assert "/.aider*" in (project.workspace / ".git" / "info" / "exclude").read_text()
    assert ".gitignore" not in diff
    seeded = json.loads(log.strip().splitlines()[-1])
    assert isinstance(seeded, dict)
    assert seeded  # aider fetches when its cache is empty
