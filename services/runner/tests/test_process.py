"""The agent's process group: the budget kills it whole; its env is scrubbed."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from processes import gone
from sreforge_runner import Budgets, HostSandbox, RunnerSettings, run_in_group


def _wait_gone(pids: list[int], deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not all(gone(pid) for pid in pids):
        assert time.monotonic() < deadline, f"processes {pids} still alive after {deadline_s}s"
        time.sleep(0.02)


def _read_pids(path: Path) -> list[int]:
    deadline = time.monotonic() + 10
    while not path.exists() or len(path.read_text().split()) < 2:
        assert time.monotonic() < deadline, f"{path} never listed two pids"
        time.sleep(0.02)
    return [int(pid) for pid in path.read_text().split()]


async def test_the_budget_kills_the_child_and_its_grandchild(tmp_path: Path) -> None:
    """On expiry the whole group dies, not just the leader; the timeout is reported."""
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    started = time.monotonic()
    outcome = await run_in_group(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=2.0,
        log_path=tmp_path / "out.log",
        grace_s=0.5,
    )
    assert outcome.timed_out
    assert time.monotonic() - started < 15
    _wait_gone(_read_pids(pids))


async def test_a_sigterm_ignoring_agent_is_killed_after_the_grace(tmp_path: Path) -> None:
    """An agent that traps SIGTERM still dies (SIGKILL after the grace period)."""
    outcome = await run_in_group(
        ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=0.5,
        log_path=tmp_path / "out.log",
        grace_s=0.3,
    )
    assert outcome.timed_out
    assert outcome.exit_code is not None
    assert outcome.exit_code < 0


async def test_leftover_background_processes_die_when_the_leader_exits(tmp_path: Path) -> None:
    """An agent that exits leaving a daemon behind does not leave it running."""
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; exit 3"
    outcome = await run_in_group(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=30,
        log_path=tmp_path / "out.log",
    )
    assert not outcome.timed_out
    assert outcome.exit_code == 3
    _wait_gone(_read_pids(pids))


async def test_the_agent_env_is_scrubbed_with_a_fresh_home(
    tiny_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No harness secret or venv reaches the agent; HOME is new; `submit` is first on PATH."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    sandbox = HostSandbox(tiny_repo, tmp_path / "agent", RunnerSettings())
    sandbox.create()
    outcome = await sandbox.run(["/bin/sh", "-c", "env; pwd; command -v submit"], 30)
    assert outcome.exit_code == 0
    out = sandbox.log_path.read_text()
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert "OPENAI_API_KEY" not in env
    assert "VIRTUAL_ENV" not in env
    assert env["HOME"] == str(sandbox.home)
    assert env["PATH"].split(":")[0] == str(sandbox.bin_dir)
    assert env["LANG"] == "C.UTF-8"
    assert str(tiny_repo) in out.splitlines()
    assert str(sandbox.bin_dir / "submit") in out.splitlines()
    assert os.environ["OPENAI_API_KEY"] not in out
    sandbox.destroy()
    assert not sandbox.home.exists()
    assert sandbox.log_path.exists()


async def test_no_output_before_session_start_fires_that_budget(tmp_path: Path) -> None:
    """An agent that never speaks is stopped by the session-start budget, not the total."""
    outcome = await run_in_group(
        ["/bin/sh", "-c", "sleep 300"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=Budgets(total_s=60, idle_s=30, session_start_s=0.5),
        log_path=tmp_path / "out.log",
        grace_s=0.3,
    )
    assert outcome.timeout == "session_start"
    assert not outcome.saw_output
    assert outcome.duration_s < 20


async def test_steady_output_keeps_the_idle_watchdog_quiet_until_it_stops(tmp_path: Path) -> None:
    """Output every 0.2 s resets the idle clock; the silence after it fires `idle`."""
    script = "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.2; done; sleep 300"
    outcome = await run_in_group(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=Budgets(total_s=60, idle_s=1.0, session_start_s=10),
        log_path=tmp_path / "out.log",
        transcript_path=tmp_path / "stream.jsonl",
        grace_s=0.3,
    )
    assert outcome.timeout == "idle"
    assert outcome.duration_s > 1.6  # the ticks (8 x 0.2 s) all came before it fired
    lines = [json.loads(line) for line in (tmp_path / "stream.jsonl").read_text().splitlines()]
    assert [line["text"] for line in lines] == [f"tick {i}" for i in range(1, 9)]
    stamps = [datetime.fromisoformat(line["t"]) for line in lines]
    assert stamps == sorted(stamps)
    assert stamps[-1] - stamps[0] > timedelta(seconds=1)


async def test_stdin_is_closed_and_both_streams_are_stamped(tmp_path: Path) -> None:
    """stdin reads EOF at once; stdout and stderr lines are kept apart, a partial last
    line is marked."""
    script = "cat; echo out; echo err >&2; printf tail"
    outcome = await run_in_group(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        budget_s=Budgets(total_s=20, idle_s=10, session_start_s=10),
        log_path=tmp_path / "out.log",
        transcript_path=tmp_path / "stream.jsonl",
    )
    assert outcome.exit_code == 0
    assert outcome.timeout is None
    lines = [json.loads(line) for line in (tmp_path / "stream.jsonl").read_text().splitlines()]
    simple = sorted((line["stream"], line["text"], line.get("partial", False)) for line in lines)
    assert simple == [("stderr", "err", False), ("stdout", "out", False), ("stdout", "tail", True)]
