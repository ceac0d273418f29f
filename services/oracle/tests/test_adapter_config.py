"""The adapter's pure pieces: grading config, hand-off alerts, fail-closed events."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import pytest
from sreforge_contracts import RunFailed, Scored, TriggerSignal
from sreforge_oracle import (
    DeliveryOutcome,
    ObservedAlert,
    OracleError,
    Outcome,
    PrometheusTiming,
    fail_closed_scored,
    find_manifest,
    grading_config,
    handoff_union,
)


class UseCases(Protocol):
    """The temporary use-cases root of conftest."""

    root: Path

    def add(
        self, scenario_id: str, alert: str, *, sustained: float = 20, max_clear: float = 30
    ) -> Path: ...


def test_grading_config_scales_the_manifest_and_derives_cadence(use_cases: UseCases) -> None:
    """Windows x time scale; probe 1 s x scale; load grace = scrape interval + warm-up; a
    clear counts after the grace, the alert's `for` and two evaluations."""
    use_cases.add("quiet", "NeverFires", sustained=360, max_clear=600)
    manifest = find_manifest(use_cases.root, "quiet")
    timing = PrometheusTiming(0.5, 0.4, alert_for_seconds=3.0)
    config = grading_config(manifest, 0.1, timing, load_warmup_seconds=1.0)
    assert config.alert_to_clear == "NeverFires"
    assert config.max_clear_time_seconds == pytest.approx(60)
    assert config.sustained_clear_seconds == pytest.approx(36)
    assert config.probe_interval_seconds == pytest.approx(0.1)
    assert config.load_grace_seconds == pytest.approx(1.4)
    assert config.clear_settle_seconds == pytest.approx(1.4 + 3.0 + 2 * 0.5)  # grace+for+2 evals
    assert config.load_dip_tolerance_seconds == pytest.approx(0.4)  # one scrape
    assert config.service_dip_tolerance_seconds == pytest.approx(0.4)
    assert config.scope == frozenset({"api"})
    assert config.pass_threshold == 0.85
    assert config.weights["alert_cleared"] == 0.35
    assert config.service_min_ok_ratio is None  # undeclared: no service_held gate


def test_probe_interval_is_never_coarser_than_the_eval_interval(use_cases: UseCases) -> None:
    """At scale 1 the probe would be 1 s; a 0.2 s rule evaluation makes it 0.2 s."""
    use_cases.add("quiet", "NeverFires")
    manifest = find_manifest(use_cases.root, "quiet")
    config = grading_config(manifest, 1.0, PrometheusTiming(0.2, 0.2), load_warmup_seconds=0)
    assert config.probe_interval_seconds == pytest.approx(0.2)


def test_an_unknown_scenario_names_the_folder_searched(use_cases: UseCases) -> None:
    """A scenario id with no folder is an error naming the use-cases root."""
    with pytest.raises(OracleError, match=f"'ghost'.*{use_cases.root}"):
        find_manifest(use_cases.root, "ghost")


def test_handoff_union_keeps_firing_alerts_from_both_sources() -> None:
    """Snapshot (firing only) plus the correlator's signals, one entry per name+service."""
    snapshot = [
        ObservedAlert(name="A", state="firing", labels={"service": "api", "instance": "x"}),
        ObservedAlert(name="P", state="pending", labels={"service": "api"}),
    ]
    signals = [
        TriggerSignal(alert_name="A", labels={"service": "api"}, fired_at=datetime.now(UTC)),
        TriggerSignal(alert_name="B", labels={"service": "db"}, fired_at=datetime.now(UTC)),
    ]
    union = handoff_union(snapshot, signals)
    assert sorted(alert.key for alert in union) == [("A", "api"), ("B", "db")]
    assert all(alert.state == "firing" for alert in union)


@pytest.mark.parametrize(
    ("outcome", "verdict", "signal"),
    [
        (
            DeliveryOutcome(submitted=False, ci_green=False, redeployed=False),
            "failed",
            "no_submission",
        ),
        (DeliveryOutcome(submitted=True, ci_green=False, redeployed=False), "rejected", "ci_green"),
        (
            DeliveryOutcome(submitted=True, ci_green=True, redeployed=False, reason="boom"),
            "failed",
            "deployed",
        ),
    ],
    ids=["no-submission", "ci-red", "redeploy-failed"],
)
def test_fail_closed_scored(outcome: DeliveryOutcome, verdict: str, signal: str) -> None:
    """Each fail-closed case scores 0 with its one signal, as the run's `<run_id>.Scored`."""
    event = fail_closed_scored("run-1", outcome)
    assert (event.verdict, event.score.score, event.score.passed) == (verdict, 0.0, False)
    assert [s.id for s in event.score.signals] == [signal]
    assert event.event_id == "run-1.Scored"
    assert event.sli_series == []


def test_the_redeploy_error_reaches_the_signal_detail() -> None:
    """A failed redeploy says why, in the `deployed` signal's detail."""
    outcome = DeliveryOutcome(submitted=True, ci_green=True, redeployed=False, reason="port busy")
    assert "port busy" in fail_closed_scored("run-1", outcome).score.signals[0].detail


def test_outcome_round_trips_through_kv_bytes() -> None:
    """The KV encoding keeps the event (type and id) and the published flag."""
    scored = fail_closed_scored(
        "run-1", DeliveryOutcome(submitted=False, ci_green=False, redeployed=False)
    )
    failed = RunFailed(
        run_id="run-1", producer="oracle", stage="oracle", reason="x", verdict="error"
    )
    for event in (scored, failed):
        back = Outcome.from_bytes(Outcome(event, True).to_bytes())
        assert back.published
        assert back.event == event
    assert isinstance(Outcome.from_bytes(Outcome(scored, False).to_bytes()).event, Scored)


REPO_USE_CASES = Path(__file__).resolve().parents[3] / "use-cases"


def test_the_stampede_scenario_declares_the_outside_gates() -> None:
    """latency-cache-stampede: the client objective, the count cross-check, and every run
    gated on the monitoring plane since the fault's armed time."""
    manifest = find_manifest(REPO_USE_CASES, "latency-cache-stampede")
    armed = datetime(2026, 1, 1, tzinfo=UTC)
    timing = PrometheusTiming(5.0, 5.0)
    cfg = grading_config(manifest, 1.0, timing, load_warmup_seconds=1.0, fault_armed_at=armed)
    assert (cfg.client_latency_objective_seconds, cfg.client_latency_objective_ratio) == (
        0.3,
        0.99,
    )
    assert cfg.telemetry_gated
    assert cfg.telemetry_count_tolerance == 0.1
    assert (cfg.monitoring_gated, cfg.fault_armed_at) == (True, armed)
    assert cfg.monitoring_jobs == {"bookshelf-api", "loadgen"}  # named by its queries
    tolerances = (
        cfg.client_dip_tolerance_seconds,
        cfg.telemetry_dip_tolerance_seconds,
        cfg.monitoring_dip_tolerance_seconds,
    )
    assert tolerances == (5.0, 5.0, 5.0)  # shorter than one scrape interval only
    telemetry = manifest.verify.telemetry
    assert telemetry is not None
    assert 'endpoint="/search"' in telemetry.app_requests_promql
    assert telemetry.load_requests_promql == 'sum(loadgen_requests_total{job="loadgen"})'


def test_a_scenario_without_them_still_gates_telemetry_and_monitoring(use_cases: UseCases) -> None:
    """Undeclared: no client objective and no count check, but the SLI must have values
    and the monitoring plane must hold (an unknown armed time fails it closed)."""
    use_cases.add("plain", "NeverFires")
    cfg = grading_config(
        find_manifest(use_cases.root, "plain"), 1.0, PrometheusTiming(1, 1), load_warmup_seconds=0
    )
    assert cfg.client_latency_objective_seconds is None
    assert cfg.telemetry_count_tolerance is None
    assert (cfg.telemetry_gated, cfg.monitoring_gated, cfg.fault_armed_at) == (True, True, None)
    assert cfg.monitoring_jobs == frozenset()  # its SLI is a recording rule: no job named


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("client_latency_objective_seconds = 0.3\n", "client_latency_objective_ratio"),
        ("client_latency_objective_ratio = 0.99\n", "client_latency_objective_seconds"),
        ("client_latency_objective_seconds = 0.3\nclient_latency_objective_ratio = 1.5\n", "ratio"),
        (
            "\n[verify.telemetry]\napp_requests_promql = 'a'\nload_requests_promql = 'b'\n"
            "count_tolerance = 1.0\n",
            "count_tolerance",
        ),
        ("\n[verify.telemetry]\nload_requests_promql = 'b'\n", "app_requests_promql"),
        ("\n[verify.telemetry]\napp_requests_promql = 'a'\n", "load_requests_promql"),
    ],
    ids=["no-ratio", "no-seconds", "ratio-above-1", "tolerance-1", "no-app-query", "no-load-query"],
)
def test_bad_outside_gate_fields_name_the_field(
    use_cases: UseCases, extra: str, field: str
) -> None:
    """A wrong or half-declared field is refused, the error naming it."""
    folder = use_cases.add("bad", "NeverFires")
    toml = (folder / "scenario.toml").read_text()
    (folder / "scenario.toml").write_text(
        toml.replace('scope = ["api"]\n', f'scope = ["api"]\n{extra}', 1)
        if "[verify.telemetry]" not in extra
        else toml + extra
    )
    with pytest.raises(OracleError, match=field):
        find_manifest(use_cases.root, "bad")
