"""End to end: `sreforge campaign` of 2 agents x 1 scenario x 5 trials on the embedded
engine, interrupted with Ctrl-C (SIGINT) after a few records, then resumed.

The acceptance of issue 13's campaign part: the interrupted campaign lets the runs it
started end with their records and starts no other; the resume runs only the rest; the
campaign ends with exactly 10 result lines and 10 records, and the pass@k table says
reference pass@1 = 1, noop pass@1 = 0. Ten quick runs, five at once (about 5 min on 2
cores, beside the module pools of the other whole-run tests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wholerun import REPO, SCENARIO, Run, kill_session

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(1500),
    # Five quick runs at once on 2 cores: an earlier try had one reference run in five fail
    # client_sli_held (CPU-starved); on 2026-12-02 it passed alone in 3 min 42 s. It stays
    # by hand: beside CI's other whole runs it would put seven runs on 2 cores.
    pytest.mark.skipif(
        os.environ.get("SREFORGE_CAMPAIGN_E2E") != "1",
        reason="by hand: SREFORGE_CAMPAIGN_E2E=1 (about 4 min alone)",
    ),
]

AGENTS = ("reference", "noop")
TRIALS = 5
CONCURRENCY = int(os.environ.get("SREFORGE_E2E_CAMPAIGN_CONCURRENCY", "5"))
"""Runs at once: 5 on 2 cores when the machine is otherwise idle (as in CI)."""
INTERRUPT_AFTER = 2
"""Result lines before Ctrl-C: the first noop runs end early, while the rest still run."""
LIMIT_S = 900.0
CAMPAIGN = f"""\
scenarios = ["{SCENARIO}"]
agents = {json.dumps(list(AGENTS))}
trials = {TRIALS}
time_scale = 0.1
concurrency = {CONCURRENCY}
"""


def _campaign(run: Run, *args: str) -> subprocess.Popen[str]:
    env = run.env() | {"SREFORGE_CAMPAIGNS_DIR": str(run.root / "campaigns")}
    stderr = (run.root / "stderr.log").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "sreforge", "campaign", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
        start_new_session=True,
    )  # fmt: skip


def _lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait(proc: subprocess.Popen[str], run: Run) -> str:
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        out, _ = proc.communicate()
        pytest.fail(f"the campaign did not end in {LIMIT_S:.0f}s:\n{run.progress}")
    return out


def test_an_interrupted_campaign_resumes_to_exactly_ten_records(tmp_path: Path) -> None:
    """Ctrl-C after a few records: no run is lost or started twice; the resume finishes
    the campaign with 10 result lines, 10 records and reference 5/5, noop 0/5."""
    run = Run("campaign", "reference", tmp_path, agents=AGENTS)
    spec = tmp_path / "smoke.toml"
    spec.write_text(CAMPAIGN)
    started = time.monotonic()
    first = _campaign(run, str(spec))
    try:
        campaigns = tmp_path / "campaigns"
        deadline = time.monotonic() + LIMIT_S
        while len(_lines(next(iter(campaigns.glob("*/results.jsonl")), tmp_path / "none"))) < (
            INTERRUPT_AFTER
        ):
            assert first.poll() is None, f"the campaign ended early:\n{run.progress}"
            assert time.monotonic() < deadline, f"no records in time:\n{run.progress}"
            time.sleep(0.5)
        os.kill(first.pid, signal.SIGINT)  # the CLI only, as a terminal's Ctrl-C would
        _wait(first, run)
    finally:
        kill_session(first.pid)
    interrupted_s = time.monotonic() - started
    assert first.returncode == 130, f"exit {first.returncode}:\n{run.progress}"
    said = (tmp_path / "stderr.log").read_text()  # all of it: the services log there too
    assert "stopping: no new runs" in said, run.progress
    (folder,) = campaigns.iterdir()
    before = _lines(folder / "results.jsonl")
    assert INTERRUPT_AFTER <= len(before) < 2 * TRIALS, run.progress
    assert len(list(run.records_dir.glob("*/record.json"))) == len(before), (
        "a run started before Ctrl-C ended without its line, or one was started after"
    )

    second = _campaign(run, "resume", folder.name)
    try:
        table = _wait(second, run)
    finally:
        kill_session(second.pid)
    print(f"\ncampaign wall: {time.monotonic() - started:.0f}s "
          f"(interrupted after {interrupted_s:.0f}s with {len(before)} lines)")  # fmt: skip
    print(table)
    assert second.returncode == 0, f"exit {second.returncode}:\n{run.progress}"
    results = _lines(folder / "results.jsonl")
    assert len(results) == 2 * TRIALS, results
    keys = {(r["agent"], r["scenario"], r["trial"]) for r in results}
    assert len(keys) == 2 * TRIALS, "a trial ran twice"
    assert results[: len(before)] == before, "the resume rewrote finished trials"
    records = sorted(run.records_dir.glob("*/record.json"))
    assert len(records) == 2 * TRIALS
    assert {str(path) for path in records} == {r["record"] for r in results}
    shown = subprocess.run(
        [sys.executable, "-m", "sreforge", "campaign", "show", folder.name, "--json"],
        cwd=REPO, env=run.env() | {"SREFORGE_CAMPAIGNS_DIR": str(campaigns)},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    groups = {group["agent"]: group for group in json.loads(shown.stdout)["groups"]}
    assert groups["reference"]["n"] == TRIALS
    assert groups["noop"]["n"] == TRIALS
    assert groups["reference"]["pass_at"]["1"] == 1.0, groups["reference"]
    assert groups["noop"]["pass_at"]["1"] == 0.0, groups["noop"]
    assert groups["reference"]["pass_hat"][str(TRIALS)] == 1.0
    assert groups["reference"]["median_clear_s"] is not None
    for name in ("campaign.toml", "summary.json", "summary.csv"):
        assert (folder / name).is_file()
    left = list(run.stacks_dir.iterdir()) if run.stacks_dir.exists() else []
    assert not left, f"stack run dirs remain: {left}"
