"""What every finished whole run must show: one schema-valid record, nothing left."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import psutil
from sreforge_deployer._compose_project import ComposeProject, project_name

from ._pool import REPO, Run, RunPool
from ._session import live_pids

SCHEMA = REPO / "libs" / "contracts" / "schemas" / "run-record.v1.schema.json"


def finished(
    pool: RunPool, name: str, *, graded: bool = True
) -> tuple[Run, dict[str, Any], dict[str, Any]]:
    """The run, its `--json` outcome and its one validated record (with signals if graded)."""
    run = pool.result(name)
    print(f"\n{name}: wall {run.wall_s:.1f} s, exit {run.exit_code}")
    print("\n".join(line for line in run.progress.splitlines() if not line.startswith("{")))
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"{name}: expected one JSON outcome, got {run.stdout!r}\n{run.progress}"
    outcome = json.loads(lines[0])
    records = sorted(run.records_dir.glob("*/record.json"))
    said = f"{name}: expected one record, found {records}; the CLI said {outcome.get('reason')}"
    assert len(records) == 1, f"{said}\n{run.progress}"
    assert outcome["record"] == str(records[0]), f"{name}: CLI names {outcome['record']}"
    record = json.loads(records[0].read_text())
    for found in record["score"]["signals"]:
        print(f"  {found['id']:<16} {found['satisfied']!s:<5} {found['detail']}")
    jsonschema.validate(record, json.loads(SCHEMA.read_text()))
    assert record["run_id"] == outcome["run_id"]
    assert record["verdict"] == outcome["verdict"], f"{name}: record and CLI disagree"
    if graded:
        assert record["score"]["signals"], f"{name}: no signals: {outcome}\n{run.progress}"
        assert isinstance(record["sli_series"], list)
    assert_nothing_left(run, records[0].parent, (live_pids() | pool.live_pids()) - {run.pid})
    if run.topology == "compose":
        assert record.get("topology") == "compose", f"{name}: record says {record.get('topology')}"
        left = ComposeProject(project_name(record["run_id"])).leftovers()
        assert not left, f"{name}: the run's Compose project is not gone: {left}"
    return run, outcome, record


def signals_of(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The record's oracle signals by id."""
    return {found["id"]: found for found in record["score"]["signals"]}


def events_of(record_dir: Path) -> list[dict[str, Any]]:
    """The run's event log, in order (each entry's `event`)."""
    lines = (record_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["event"] for line in lines if line.strip()]


def assert_nothing_left(run: Run, record_dir: Path, live_runs: set[int]) -> None:
    """No process of the run, no listener on a port its stack used (a patch run has no
    stack), no stack run dir.

    A run still going (`live_runs`: their CLI pids) may have leased a port this run
    released: its listeners are its own, not this run's leftovers.
    """
    ports = _stack_ports(record_dir / "events.jsonl")
    profile = json.loads((record_dir / "record.json").read_text()).get("profile")
    if profile != "patch":  # a patch run has a workspace, no stack and no ports
        assert ports, f"{run.name}: no StackReady endpoints in the event log"
    left_dirs = list(run.stacks_dir.iterdir()) if run.stacks_dir.exists() else []
    assert not left_dirs, f"{run.name}: stack run dirs remain: {left_dirs}"
    listening = {
        conn.laddr.port
        for conn in psutil.net_connections("tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr and not _started_by(conn.pid, live_runs)
    }
    assert not (ports & listening), f"{run.name}: ports still listening: {ports & listening}"
    survivors = [p for p in psutil.process_iter(["pid", "cmdline"]) if _belongs(p, run)]
    assert not survivors, f"{run.name}: processes remain: {[p.info for p in survivors]}"


def _stack_ports(events: Path) -> set[int]:
    for line in events.read_text().splitlines():
        event = json.loads(line)["event"]
        if event["type"] == "StackReady":
            return {urlsplit(url).port or 0 for url in event["operator_endpoints"].values()}
    return set()


def _started_by(pid: int | None, runs: set[int]) -> bool:
    """Whether `pid` descends from (or shares a session with) one of the `runs`' CLIs."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        lineage = {pid, *(parent.pid for parent in proc.parents()), os.getsid(pid)}
    except (ProcessLookupError, psutil.Error):
        return False
    return bool(lineage & runs)


def _belongs(proc: psutil.Process, run: Run) -> bool:
    try:
        if run.pid is not None and os.getsid(proc.pid) == run.pid:
            return True
        if str(run.root) in " ".join(proc.info["cmdline"] or ()):
            return True
        return Path(proc.cwd()).is_relative_to(run.root)  # e.g. the app in the workspace
    except (ProcessLookupError, psutil.Error):
        return False
