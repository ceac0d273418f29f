"""The campaign folder and resume bookkeeping: which trials are finished, which rerun."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sreforge_contracts import OracleScore, OracleSignal

from sreforge._run_view import Outcome
from sreforge.campaign._errors import CampaignError
from sreforge.campaign._outcome import result_of, time_to_clear, usage
from sreforge.campaign._show import format_progress, format_table, summary
from sreforge.campaign._spec import parse_spec
from sreforge.campaign._stats import summarise
from sreforge.campaign._store import (
    CampaignStore,
    Result,
    TrialKey,
    finished_keys,
    pending_trials,
    planned_trials,
)

SPEC = parse_spec(
    'scenarios = ["s1"]\nagents = ["ref", "noop"]\ntrials = 3\ntime_scale = 0.1', "c.toml"
)


def _result(agent: str, trial: int, verdict: str, score: float | None = None) -> Result:
    return Result(agent, "s1", trial, f"run-{agent}-{trial}", verdict, score)


def test_the_plan_is_round_robin_over_trials() -> None:
    """Trial 1 of every agent x scenario comes before any trial 2."""
    plan = planned_trials(SPEC)
    assert len(plan) == 6
    assert [(k.agent, k.trial) for k in plan[:3]] == [("ref", 1), ("noop", 1), ("ref", 2)]


def test_once_agents_run_a_single_trial_and_once_must_name_agents() -> None:
    """An agent listed in `once` has trial 1 only (and it survives the TOML round trip);
    `once` naming an agent the campaign does not run is refused, naming the field."""
    spec = parse_spec(
        'scenarios = ["s1"]\nagents = ["ref", "cheat"]\ntrials = 3\nonce = ["cheat"]', "c.toml"
    )
    plan = planned_trials(spec)
    assert [(k.agent, k.trial) for k in plan] == [("ref", 1), ("cheat", 1), ("ref", 2), ("ref", 3)]
    assert parse_spec(spec.to_toml(), "stored").once == ("cheat",)
    with pytest.raises(CampaignError, match=r"c.toml: once: not in agents: \['other'\]"):
        parse_spec('scenarios = ["s1"]\nagents = ["ref"]\nonce = ["other"]', "c.toml")


def test_a_resume_skips_finished_trials_and_retries_errors() -> None:
    """Passed/failed/aborted trials are finished; an `error` line is retried; the last
    line of a trial stands (an error retried and then passed is finished)."""
    results = [
        _result("ref", 1, "passed", 1.0),
        _result("noop", 1, "failed", 0.0),
        _result("ref", 2, "error"),
        _result("noop", 2, "aborted"),
        _result("noop", 3, "error"),
        _result("noop", 3, "failed", 0.0),
    ]
    assert finished_keys(results) == {
        TrialKey("ref", "s1", 1), TrialKey("noop", "s1", 1),
        TrialKey("noop", "s1", 2), TrialKey("noop", "s1", 3),
    }  # fmt: skip
    assert pending_trials(SPEC, results) == [TrialKey("ref", "s1", 2), TrialKey("ref", "s1", 3)]
    more = parse_spec(SPEC.to_toml() + "", "c", {"trials": 4})
    assert TrialKey("noop", "s1", 4) in pending_trials(more, results)


def test_results_survive_a_torn_last_line(tmp_path: Path) -> None:
    """Lines are appended one by one; a line cut short by a kill is skipped (that trial
    reruns), the others are read back as written."""
    store = CampaignStore(tmp_path, "20261201-190000-abcdef")
    store.create(SPEC)
    store.append(_result("ref", 1, "passed", 0.93))
    with store.results_file.open("a") as out:
        out.write('{"agent": "noop", "scen')
    assert store.results() == [_result("ref", 1, "passed", 0.93)]
    assert store.spec() == SPEC


def test_an_unknown_or_malformed_campaign_id_is_refused(tmp_path: Path) -> None:
    """`show`/`resume` of a campaign that is not there, or an id that is a path, is an error."""
    with pytest.raises(CampaignError, match="no campaign 20261201-000000-000000"):
        CampaignStore(tmp_path, "20261201-000000-000000").spec()
    with pytest.raises(CampaignError, match="is not valid"):
        CampaignStore(tmp_path, "../elsewhere")


def test_summaries_hold_the_pass_at_k_table(tmp_path: Path) -> None:
    """summary.json and summary.csv: one group per agent x scenario, errors left out."""
    results = [
        *(_result("ref", t, "passed", 0.9) for t in (1, 2, 3)),
        *(_result("noop", t, "failed", 0.0) for t in (1, 2)),
        _result("noop", 3, "error"),
    ]
    store = CampaignStore(tmp_path, "20261201-190000-abcdef")
    store.create(SPEC)
    found = summary(store.campaign_id, SPEC, results)
    rows = summarise(r.for_stats() for r in results if r.verdict != "error")
    store.write_summaries(found, rows)
    written = json.loads((store.path / "summary.json").read_text())
    assert written["trials"] == {"planned": 6, "finished": 5, "errors": 1}
    ref, noop = written["groups"]
    assert (ref["agent"], ref["pass_at"]["1"], ref["pass_hat"]["3"]) == ("ref", 1.0, 1.0)
    assert (noop["n"], noop["pass_at"]["2"]) == (2, 0.0)
    [comparison] = written["comparisons"]
    assert (comparison["a"], comparison["b"], comparison["difference"]) == ("ref", "noop", 1.0)
    table = list(csv.DictReader((store.path / "summary.csv").open()))
    assert [row["agent"] for row in table] == ["ref", "noop"]
    assert table[0]["pass@3"] == "1"
    assert table[1]["pass@3"] == ""


def test_the_table_and_progress_line_say_what_stands() -> None:
    """`campaign show`: pass@1 / pass@k / pass^k per row in the file's agent order (not
    the order trials ended in) and the A/B line; the progress
    line: done / running / queued, pass counts so far and an ETA."""
    results = [_result("noop", 1, "failed", 0.0), _result("ref", 1, "passed", 0.9)]
    table = format_table("c-1", SPEC, results)
    assert "2/6 trials finished at time scale 0.1 (smoke verdicts)" in table
    head, ref, noop = table.splitlines()[2:5]
    assert head.split()[:7] == ["agent", "scenario", "n", "passed", "pass@1", "pass@3", "pass^3"]
    assert ref.split()[:5] == ["ref", "s1", "1", "1/1", "1.00"]
    assert noop.split()[:5] == ["noop", "s1", "1", "0/1", "0.00"]
    assert "A/B ref - noop: pass rate +1.00" in table
    line = format_progress(SPEC, results, running=2, queued=2, mean_wall_s=60.0, slots=2)
    assert line == "2/6 done, 2 running, 2 queued; passed ref 1/1, noop 0/1; ETA 2m00s"
    line = format_progress(
        SPEC, results, running=2, queued=2, mean_wall_s=60.0, slots=2, stopping=True
    )
    assert line == "2/6 done, 2 running, 2 left for a resume; passed ref 1/1, noop 0/1; ETA 1m00s"


def _score(detail: str, satisfied: bool = True) -> OracleScore:
    signal = OracleSignal(
        id="time_to_clear", satisfied=satisfied, value=0.5, weight=1.0, detail=detail
    )
    return OracleScore(score=0.8, passed=True, signals=[signal])


def test_time_to_clear_and_usage_are_read_from_what_the_run_left() -> None:
    """The oracle's time_to_clear signal gives seconds; the harness's model-call summary
    gives tokens and cost (not what the agent's own output claims); nothing counted is
    None, not 0."""
    assert time_to_clear(_score("cleared after 12.5s of 30.0s: 1 - t/max = 0.583")) == 12.5
    assert time_to_clear(_score("not cleared within 30.0s", satisfied=False)) is None
    assert time_to_clear(None) is None
    raw = {
        "lines": [{"usage": {"input_tokens": 9, "output_tokens": 9}, "total_cost_usd": 9.0}],
        "model_calls": {"calls": 2, "tokens_in": 100, "tokens_out": 20, "cost_usd": 0.25,
                        "rows": [{"tokens_in": 60, "cost_usd": 0.1}]},
    }  # fmt: skip
    assert usage(raw) == (120, 0.25)
    unpriced = {"model_calls": {"tokens_in": 5, "tokens_out": 1, "cost_usd": None}}
    assert usage(unpriced) == (6, None)
    assert usage({"text": "no usage here"}) == (None, None)


def test_a_trial_without_a_record_is_an_error_line_to_retry() -> None:
    """A run that never got a record (no answer, deadline) is `error`, naming why; one that
    `run.start` refused is `aborted` (not graded), a CI rejection stays `rejected`."""
    key = TrialKey("ref", "s1", 1)
    refused = result_of(key, Outcome(None, "rejected", reason="agent not allowed"), 0.4)
    assert refused.verdict == "error"
    assert refused.reason == "no record (aborted): run.start refused: agent not allowed"
    recorded_refusal = Outcome("run-0", "rejected", reason="no scenario 'x'", record="/r.json")
    line = result_of(key, recorded_refusal, 0.4)
    assert (line.verdict, line.reason) == ("aborted", "run.start refused: no scenario 'x'")
    ci_red = Outcome("run-2", "rejected", score=_score("x", False), record="/r.json")
    assert result_of(key, ci_red, 1.0).verdict == "rejected", "a CI rejection is graded"
    recorded = Outcome("run-1", "failed", score=_score("x", False), record="/nowhere/record.json")
    line = result_of(key, recorded, 61.23)
    assert (line.verdict, line.score, line.wall_s, line.tokens) == ("failed", 0.8, 61.2, None)
