"""The real mini-swe-agent, as shipped (`agents/mini-swe-agent.toml`), against the replay model.

The CLI runs in bubblewrap; its model calls go through the runner's model proxy to a
replay server (the test double for the hosted API) playing `conversations.mini_swe_agent`.
Set `SREFORGE_TEST_MINI_SWE_AGENT_EXECUTABLE` to a venv's `bin/mini-swe-agent`
(`pip install mini-swe-agent==2.4.6`); without it the test skips.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from realcli import changed_lines, drive_shipped, venv_cli
from replay.conversations import mini_swe_agent
from sreforge_runner import TRANSCRIPT_FILE, RunnerSettings, read_sentinel

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

KEY = "sk-real-test-key-mini-0123456789"
UNREACHABLE = ("githubusercontent", "pypi.org", "Name or service not known", "Failed to fetch")
"""What the CLI prints when it tries the internet (which the sandbox does not have)."""


@pytest.mark.timeout(300)
async def test_the_real_mini_swe_agent_fixes_and_submits_through_the_proxy(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mini-swe-agent reads, `git apply`s the fix, commits, runs `submit --rca` from its bash
    tool and finishes: the fixed diff ships, the proxy put the (dummy) real key on every
    call while the CLI only had its session token, nothing tried the internet, and the
    transcript has every call with its tokens and the trajectory."""
    cli = venv_cli("SREFORGE_TEST_MINI_SWE_AGENT_EXECUTABLE", "mini-swe-agent")
    if not project.real:
        pytest.skip("needs the bookshelf scenario (its fix is the replayed patch)")
    fix = project.fix.read_text()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    page = (project.scenario_dir / "trigger.md").read_text()
    script = mini_swe_agent.fixed(fix)
    session = await drive_shipped(
        "mini-swe-agent", cli, script, mini_swe_agent.MODEL, project.workspace, settings, page
    )
    run, box, calls, log = session.run, session.box, session.calls, session.log
    print(f"mini-swe-agent session: {session.session_s:.1f} s, {len(calls)} model calls")
    assert run.ok, (run.result.evidence, log[-3000:])
    assert run.result.evidence.confinement == "host-sandboxed"

    sentinel = read_sentinel(project.workspace)
    assert sentinel is not None, log[-3000:]
    assert sentinel.rca is not None
    assert "bookshelf/metadata.py" in sentinel.rca
    diff = session.diff()
    assert changed_lines(diff) == changed_lines(fix)
    assert ".gitignore" not in diff

    assert len(calls) == 4
    assert {call.headers.get("authorization") for call in calls} == {f"Bearer {KEY}"}
    assert {call.body["model"] for call in calls} == {"replay-1"}  # litellm drops `openai/`
    assert "just been paged" in calls[0].body["messages"][1]["content"]
    assert [tool["function"]["name"] for tool in calls[0].body["tools"]] == ["bash"]
    for call in calls:
        assert KEY not in json.dumps(call.body)
    for needle in UNREACHABLE:
        assert needle not in log, needle

    transcript = json.loads((box.root / TRANSCRIPT_FILE).read_text())
    model_calls = transcript["raw_json"]["model_calls"]
    assert (model_calls["calls"], model_calls["total_tokens"]) == (4, 480)
    assert transcript["submitted"] is True
    assert transcript["raw_json"]["native_files"] == ["session/traj.json"]
    trajectory = json.loads((box.root / "native" / "session" / "traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "Submitted"
    for kept in box.root.rglob("*"):
        if kept.is_file():
            assert KEY not in kept.read_text(errors="replace"), kept


@pytest.mark.timeout(300)
async def test_the_real_mini_swe_agents_failed_git_apply_is_recorded_as_it_happened(
    project: Any, settings: RunnerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mistaken conversation: `git apply` fails (its error goes back to the model), the
    engineer submits anyway; the submission exists and its diff is empty, nothing hidden."""
    cli = venv_cli("SREFORGE_TEST_MINI_SWE_AGENT_EXECUTABLE", "mini-swe-agent")
    if not project.real:
        pytest.skip("needs the bookshelf scenario (its fix is the replayed patch)")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = mini_swe_agent.mistaken(project.fix.read_text())
    session = await drive_shipped(
        "mini-swe-agent", cli, script, mini_swe_agent.MODEL, project.workspace, settings, "# page\n"
    )
    print(f"mini-swe-agent (mistaken) session: {session.session_s:.1f} s")
    assert session.run.ok, (session.run.result.evidence, session.log[-3000:])
    assert read_sentinel(project.workspace) is not None
    assert session.diff() == ""
    answers = [m for m in session.calls[2].body["messages"] if m["role"] == "tool"]
    assert "patch does not apply" in answers[-1]["content"]
    assert json.loads(answers[-1]["content"])["returncode"] == 1
