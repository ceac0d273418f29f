"""`sreforge run`, its pure parts: exit codes, phase lines, the verdict block, the deadline."""

from __future__ import annotations

import argparse
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sreforge_contracts import (
    AgentExit,
    CiResult,
    CleanedUp,
    Determinism,
    OracleScore,
    OracleSignal,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    Submission,
    Submitted,
    Trigger,
)

from sreforge._run_cli import add_run_command
from sreforge._run_view import (
    EXIT_ABORTED,
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_PASSED,
    Outcome,
    Progress,
    describe,
    exit_code,
    format_outcome,
    format_progress,
    format_summary,
    is_proof_run,
    outcome_json,
    run_deadline,
)

RUN = "20261129-080000-abc123"
T0 = datetime(2026, 11, 29, 8, tzinfo=UTC)
SCORE = OracleScore(
    score=0.65,
    passed=False,
    signals=[
        OracleSignal(id="ci_green", satisfied=True, value=1.0, weight=0.25, detail="tests green"),
        OracleSignal(id="alert_cleared", satisfied=False, value=0.0, weight=0.35, detail="firing"),
    ],
)


@pytest.mark.parametrize(
    ("verdict", "code"),
    [
        ("passed", EXIT_PASSED),
        ("failed", EXIT_FAILED),
        ("rejected", EXIT_FAILED),
        ("aborted", EXIT_ABORTED),
        ("error", EXIT_ERROR),
        ("something-new", EXIT_ERROR),
    ],
)
def test_each_verdict_has_its_documented_exit_code(verdict: str, code: int) -> None:
    """0 passed, 1 failed/rejected, 3 aborted, 4 error; an unknown verdict is an error."""
    assert exit_code(verdict) == code
    assert Outcome(RUN, verdict).exit_code == code


def test_the_exit_codes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    """`sreforge run --help` documents every exit code."""
    parser = argparse.ArgumentParser(prog="sreforge")
    add_run_command(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    help_text = capsys.readouterr().out
    for line in ("0  passed", "1  failed", "3  aborted", "4  error"):
        assert line in help_text


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.1"])
def test_a_time_scale_outside_the_unit_interval_is_refused_by_the_parser(bad: str) -> None:
    """The parser refuses an impossible time scale before anything starts."""
    parser = argparse.ArgumentParser(prog="sreforge")
    add_run_command(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "x", "--agent", "noop", "--time-scale", bad])


def test_the_topology_flag_reaches_run_start_and_defaults_to_the_stacks() -> None:
    """`--topology compose` picks the compose topology; without it the request names none
    (the deployer takes the scenario's stack's declaration, else local)."""
    parser = argparse.ArgumentParser(prog="sreforge")
    add_run_command(parser.add_subparsers())
    assert parser.parse_args(["run", "x", "--agent", "noop"]).topology is None
    chosen = parser.parse_args(["run", "x", "--agent", "noop", "--topology", "compose"])
    assert chosen.topology == "compose"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "x", "--agent", "noop", "--topology", "k8s"])


def test_a_progress_line_shows_elapsed_time_phase_and_detail() -> None:
    """Aligned columns: elapsed seconds, the phase, the detail."""
    assert (
        format_progress(12.345, "triggered", "Alert fired") == "   12.3s  triggered    Alert fired"
    )


def test_phase_events_are_described_with_their_detail() -> None:
    """Every phase event gets a line, the teardown included, so the operator sees it end."""
    requested = RunRequested(
        run_id=RUN, producer="c", scenario="s-1", agent="noop", time_scale=0.1, alert_route="r1"
    )
    assert describe(requested) == ("requested", "s-1, agent noop, time scale 0.1")
    on_compose = requested.model_copy(update={"topology": "compose"})
    assert describe(on_compose) == (
        "requested",
        "s-1, agent noop, time scale 0.1, topology compose",
    )
    trigger = Trigger(source="alertmanager", alert_name="HighLatency", fired_at=T0)
    fired = RunTriggered(run_id=RUN, producer="c", trigger=trigger, alert_fired_at=T0)
    assert describe(fired) == ("triggered", "HighLatency fired")
    ci = CiResult(run_id=RUN, producer="d", green=False, output="boom", duration_ms=2500)
    assert describe(ci) == ("ci", "red in 2.5s")
    failed = RunFailed(
        run_id=RUN, producer="c", stage="confirm-fire", reason="no alert", verdict="aborted"
    )
    assert describe(failed) == ("failed", "confirm-fire: no alert (aborted)")
    rejected = RunRejected(run_id=RUN, producer="c", reason="run.start: agent: unknown")
    assert describe(rejected) == ("rejected", "run.start: agent: unknown")
    cleaned = CleanedUp(run_id=RUN, producer="d", verified=True)
    assert describe(cleaned) == ("cleaned up", "verified: nothing left")
    leaky = CleanedUp(run_id=RUN, producer="d", verified=False, leftovers=["pid 42"])
    assert describe(leaky) == ("cleaned up", "LEFT: pid 42")


def test_the_verdict_block_lists_each_signal_and_the_record() -> None:
    """The verdict, the score, one line per signal (satisfied or not) and the record path."""
    text = format_outcome(Outcome(RUN, "failed", score=SCORE, record="/runs/x/record.json"))
    lines = text.splitlines()
    assert lines[0] == f"verdict: failed (run {RUN})"
    assert "score:   0.65" in lines
    assert any(line.startswith("  ✓ ci_green") and "weight 0.25" in line for line in lines)
    assert any(line.startswith("  ✗ alert_cleared") and "firing" in line for line in lines)
    assert lines[-1] == "record:  /runs/x/record.json"


def test_the_verdict_block_names_the_diagnosis_beside_the_verdict(tmp_path: Path) -> None:
    """The RCA judge's score (or why it did not judge) follows the record, apart from the score."""
    record = tmp_path / "record.json"
    record.write_text("{}")
    assert format_outcome(Outcome(RUN, "failed", record=str(record))).endswith(
        "diagnosis: pending (the recorder's RCA judge is at work: sreforge show RUN_ID)"
    )
    skipped = {"reason": "no judge model configured (set SREFORGE_JUDGE_MODEL)"}
    (tmp_path / "diagnosis-skipped.json").write_text(json.dumps(skipped))
    text = format_outcome(Outcome(RUN, "failed", record=str(record)))
    assert text.endswith(
        "diagnosis: not judged: no judge model configured (set SREFORGE_JUDGE_MODEL)"
    )
    (tmp_path / "diagnosis.json").write_text(json.dumps({"score": 0.8, "judge_model": "judge-1"}))
    text = format_outcome(Outcome(RUN, "failed", record=str(record)))
    assert (
        "diagnosis: 0.80 by judge-1 (the RCA judge, beside the verdict, not in the score)" in text
    )


def test_a_rejection_block_gives_the_reason() -> None:
    """A refused start shows why, and says when no record was written."""
    text = format_outcome(Outcome(None, "rejected", reason="run.start: scenario: no scenario 'x'"))
    assert "reason:  run.start: scenario: no scenario 'x'" in text
    assert "record:  (none written)" in text


def test_the_trials_summary_counts_verdicts_and_averages_scores() -> None:
    """Pass rate over all trials; mean score ± standard error over the scored ones."""
    outcomes = [
        Outcome("a-1", "passed", score=SCORE.model_copy(update={"score": 0.9})),
        Outcome("a-2", "passed", score=SCORE.model_copy(update={"score": 0.9})),
        Outcome("a-3", "aborted"),
    ]
    summary = format_summary(outcomes)
    assert summary.startswith("3 trials: aborted 1, passed 2; pass rate 67%")
    assert "mean score 0.90 ± 0.00" in summary


def test_the_run_deadline_scales_system_windows_but_not_the_agent_budget() -> None:
    """At scale 0.1 the windows shrink tenfold; the agent budget counts in full."""
    windows = Determinism(
        confirm_fire_timeout_seconds=240, sustained_clear_seconds=360, max_clear_time_seconds=600
    )
    full = run_deadline(windows, 1.0, agent_budget_s=100)
    smoke = run_deadline(windows, 0.1, agent_budget_s=100)
    assert full - smoke == pytest.approx(0.9 * (240 + 360 + 600))
    assert run_deadline(windows, 0.1, agent_budget_s=1100) - smoke == pytest.approx(1000)


def test_progress_without_a_tty_prints_only_phase_lines() -> None:
    """Piped stderr gets plain lines (no spinner, no escape codes)."""
    stream = io.StringIO()
    progress = Progress(stream)
    progress.wait()
    progress.phase("armed", "waiting for the alert")
    progress.wait()
    assert stream.getvalue().endswith("armed        waiting for the alert\n")
    assert "\x1b" not in stream.getvalue()
    assert stream.getvalue().count("\n") == 1


def test_a_verdict_below_time_scale_one_is_labelled_smoke() -> None:
    """A quick run is a smoke verdict, and says so wherever the verdict is shown."""
    smoke = Outcome(RUN, "passed", record="/r.json", time_scale=0.1)
    assert "smoke verdict at time scale 0.1" in format_outcome(smoke).splitlines()[0]
    full = Outcome(RUN, "passed", record="/r.json")
    assert "smoke" not in format_outcome(full)


def test_a_proof_run_says_so_in_the_phase_line_and_the_verdict() -> None:
    """An unverified profile's run is labelled a proof run wherever its verdict is shown."""
    evidence = {"profile": "codex", "proof_run": True}
    submission = Submission(agent_name="codex", submitted=True, duration_ms=1500, evidence=evidence)
    submitted = Submitted(run_id=RUN, producer="runner", submission=submission)
    assert is_proof_run(submitted)
    assert describe(submitted) == ("submitted", "0 diff lines in 1.5s (proof run)")
    proof = Outcome(RUN, "passed", record="/r.json", proof_run=True)
    assert "proof run of an unverified profile" in format_outcome(proof).splitlines()[0]
    assert json.loads(outcome_json(proof))["proof_run"] is True
    plain = Submission(agent_name="noop", submitted=False, duration_ms=0)
    assert not is_proof_run(Submitted(run_id=RUN, producer="runner", submission=plain))
    assert "proof run" not in format_outcome(Outcome(RUN, "passed", record="/r.json"))
    trials = format_summary([proof, proof, Outcome(RUN, "failed")])
    assert "2 proof runs (unverified profile, not banked)" in trials


def test_a_failed_agent_shows_its_exit_code_budget_and_last_stderr_lines() -> None:
    """`no submission (exited)` is not enough: the phase line names the exit code or the
    budget that fired, and the verdict block (and --json) add the stderr tail."""
    ended = AgentExit(exit_code=41, stderr_tail=("Invalid auth method selected.",), stderr_lines=7)
    submission = Submission(
        agent_name="gemini-cli",
        submitted=False,
        duration_ms=900,
        stop_reason="exited",
        agent_exit=ended,
    )
    submitted = Submitted(run_id=RUN, producer="runner", submission=submission)
    assert describe(submitted) == ("submitted", "no submission (exited, exit code 41)")
    outcome = Outcome(RUN, "failed", record="/r.json", submitted=False, agent_exit=ended)
    block = format_outcome(outcome).splitlines()
    assert "agent:   exit code 41, no submission" in block
    assert "stderr:  (last 1 of 7 lines)" in block
    assert "  | Invalid auth method selected." in block
    assert json.loads(outcome_json(outcome))["agent_exit"]["exit_code"] == 41
    fired = AgentExit(timeout="idle")
    late = submission.model_copy(update={"stop_reason": "timeout:idle", "agent_exit": fired})
    shown = describe(Submitted(run_id=RUN, producer="runner", submission=late))
    assert shown == ("submitted", "no submission (timeout:idle, the idle budget fired)")
    clean = Outcome(RUN, "passed", submitted=True, agent_exit=AgentExit(exit_code=0))
    assert "agent:" not in format_outcome(clean)
    noop = submission.model_copy(update={"stop_reason": "no_action", "agent_exit": AgentExit()})
    shown = describe(Submitted(run_id=RUN, producer="runner", submission=noop))
    assert shown == ("submitted", "no submission (no_action)"), "no process: nothing to add"
    idle = Outcome(RUN, "failed", submitted=False, agent_exit=AgentExit())
    assert "agent:" not in format_outcome(idle)
