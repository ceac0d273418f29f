"""`sreforge stack up|down|list` across shells: the state file lets another process tear down."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sreforge_deployer._process import group_members
from sreforge_deployer.local import StackRecord, list_stacks

from sreforge._stack_cli import (
    add_stack_commands,
    describe_stack,
    handle_stack_down,
    handle_stack_list,
    resolve_scenario,
)

from .conftest import STAMPEDE, TINY_SCENARIOS, poll

pytestmark = pytest.mark.integration


class _StackUp:
    """A `stack up` running in its own process, its output collected line by line."""

    def __init__(self, runs_root: Path, *extra: str, dies_with_owner: bool | None = None) -> None:
        env = {**os.environ, "SREFORGE_DEPLOYER_RUNS_ROOT": str(runs_root)}
        env.pop("SREFORGE_DEPLOYER_STACKS_DIE_WITH_OWNER", None)
        if dies_with_owner is not None:
            env["SREFORGE_DEPLOYER_STACKS_DIE_WITH_OWNER"] = str(dies_with_owner).lower()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sreforge._stack_cli",
                "stack",
                "up",
                str(TINY_SCENARIOS / "tiny-ok"),
                "--time-scale",
                "0.1",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def cli_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "stacks"
    monkeypatch.setenv("SREFORGE_DEPLOYER_RUNS_ROOT", str(root))
    yield root
    for record in list_stacks(root):  # a failed test must not leave a stack behind
        for group in record.groups.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group.pgid, signal.SIGKILL)


def _down(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_stack_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["stack", "down", *argv])
    code: int = args.handler(args)
    assert args.handler is handle_stack_down
    return code


def test_stack_down_from_another_shell_stops_the_owner_cleanly(cli_root: Path) -> None:
    """`stack up` prints endpoints and waits; `stack down --all` elsewhere ends it, nothing left."""
    up = _StackUp(cli_root, "--arm")
    try:
        poll(lambda: "to tear down" in up.output(), timeout=60, message="stack up ready")
        text = up.output()
        assert re.search(r"prometheus\s+http://127\.0\.0\.1:\d+", text), text
        assert "armed at base commit" in text
        (record,) = list_stacks(cli_root)
        assert handle_stack_list(argparse.Namespace()) == 0
        pgids = [group.pgid for group in record.groups.values()]
        assert _down("--all") == 0
        assert up.process.wait(timeout=30) == 0
        assert "torn down, nothing left" in up.output()
        assert not record.run_dir.exists()
        assert not any(psutil.pid_exists(pgid) for pgid in pgids)
    finally:
        if up.process.poll() is None:
            os.killpg(up.process.pid, signal.SIGKILL)


def test_stack_down_cleans_up_after_a_killed_owner(cli_root: Path) -> None:
    """After `stack up` was SIGKILLed, `stack down RUN_ID` kills its groups and removes its
    dir (a stack that does not die with its owner, as an engine's deployer keeps them)."""
    up = _StackUp(cli_root, dies_with_owner=False)
    poll(lambda: "to tear down" in up.output(), timeout=60, message="stack up ready")
    (record,) = list_stacks(cli_root)
    os.kill(up.process.pid, signal.SIGKILL)
    up.process.wait(timeout=10)
    pgids = [group.pgid for group in record.groups.values()]
    assert any(psutil.pid_exists(pgid) for pgid in pgids), "components outlive a killed owner"
    assert _down(record.run_id) == 0
    assert not record.run_dir.exists()
    assert record.port_lock_dir is not None
    stale = [record.port_lock_dir / f"{port}.lock" for port in record.ports.values()]
    assert not [path for path in stale if path.exists()], "a dead owner's leases are reaped"
    assert not any(
        psutil.pid_exists(pgid) and psutil.Process(pgid).status() != psutil.STATUS_ZOMBIE
        for pgid in pgids
    )


@pytest.mark.timeout(120)
def test_a_killed_stack_up_takes_its_stack_with_it(
    cli_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL gives `stack up` no chance to tear down: its warden does, within seconds
    (processes, ports, leases, run dir), and says so; `stack list` shows the owner first."""
    up = _StackUp(cli_root)
    try:
        poll(lambda: "to tear down" in up.output(), timeout=60, message="stack up ready")
        (record,) = list_stacks(cli_root)
        assert record.dies_with_owner
        assert handle_stack_list(argparse.Namespace()) == 0
        assert f"owner pid {up.process.pid} running" in capsys.readouterr().out
        pgids = [group.pgid for group in record.groups.values()]
        os.kill(up.process.pid, signal.SIGKILL)
        up.process.wait(timeout=10)
        poll(lambda: not record.run_dir.exists(), timeout=20, message="the warden reaped")
        poll(
            lambda: not any(group_members(pgid) for pgid in pgids),
            timeout=10,
            message="the stack's processes are gone",
        )
        ports = set(record.ports.values())
        listening = {
            c.laddr.port
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr
        }
        assert not ports & listening
        assert record.port_lock_dir is not None
        assert not [p for p in ports if (record.port_lock_dir / f"{p}.lock").exists()]
        poll(lambda: "torn down, nothing left" in up.output(), timeout=10, message="it says so")
    finally:
        if up.process.poll() is None:
            os.killpg(up.process.pid, signal.SIGKILL)


def test_stack_list_says_whose_stack_it_is_and_what_becomes_of_it(tmp_path: Path) -> None:
    """Every stack is listed with its owner, alive or gone, and how a dead owner's goes."""
    record = StackRecord(
        run_id="run-a", scenario_id="tiny-ok", run_dir=tmp_path, owner_pid=4242,
        time_scale=0.1, engine_home=tmp_path / "home", dies_with_owner=True,
    )  # fmt: skip
    assert "owner pid 4242 running" in describe_stack(record, alive=True)
    gone = describe_stack(record, alive=False)
    assert "owner pid 4242 GONE (reaped at the next engine start)" in gone
    assert f"home {tmp_path / 'home'}" in gone
    kept = record.model_copy(update={"dies_with_owner": False})
    assert "GONE (`sreforge stack down run-a`)" in describe_stack(kept, alive=False)


def test_stack_down_needs_a_run_id_or_all(cli_root: Path) -> None:
    """Neither or both is a usage error, not a silent teardown of everything."""
    assert _down() == 2
    assert _down("run-x", "--all") == 2
    assert _down("run-nope") == 1


def test_scenario_resolves_by_id_and_rejects_bad_ids() -> None:
    """`stack up latency-cache-stampede` finds the folder; a malformed id is refused early."""
    assert resolve_scenario("latency-cache-stampede") == STAMPEDE.resolve()
    with pytest.raises(ValueError, match="must match"):
        resolve_scenario("../etc")


def _record_on_disk(
    root: Path, run_id: str, owner: subprocess.Popen[bytes], home: Path | None
) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    record = StackRecord(
        run_id=run_id,
        scenario_id="tiny-ok",
        run_dir=run_dir,
        owner_pid=owner.pid,
        time_scale=0.1,
        engine_home=home,
    )
    record.write()
    return run_dir


@pytest.mark.timeout(60)
def test_stack_down_all_touches_only_the_stacks_of_this_engine_home(
    cli_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The runs root is shared by every home: `--all` in home A stops A's stack and leaves
    home B's and an older record (no home) alone, saying so."""
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    owners = [subprocess.Popen(["sleep", "300"]) for _ in range(3)]
    try:
        mine = _record_on_disk(cli_root, "run-a", owners[0], home_a)
        theirs = _record_on_disk(cli_root, "run-b", owners[1], home_b)
        legacy = _record_on_disk(cli_root, "run-old", owners[2], None)
        monkeypatch.setenv("SREFORGE_HOME", str(home_a))
        monkeypatch.delenv("SREFORGE_DEPLOYER_ENGINE_HOME", raising=False)  # an engine's wiring
        assert _down("--all") == 0
        out = capsys.readouterr().out
        assert "run-a: torn down" in out
        assert owners[0].wait(timeout=30) is not None
        assert not mine.exists()
        assert owners[1].poll() is None
        assert theirs.is_dir()
        assert owners[2].poll() is None
        assert legacy.is_dir()
        assert f"run-b: left alone: started from engine home {home_b}" in out
        assert "run-old: left alone: its record names no engine home" in out
    finally:
        for owner in owners:
            owner.kill()
            owner.wait()
