"""The gates that grade from outside the app, table-driven: samples in, the gate out.

`client_sli_held` (the load generator's latency histogram), `telemetry_intact` (the
app's telemetry kept reporting) and `monitoring_intact` (the monitoring plane stayed the
same). Each case plays a cheat the app's own metrics would have let through: the
weighted signals are all full, and only the gate stands between it and `passed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    MonitoringSnapshot,
    grade,
    grading_complete,
)

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
ARMED = DEPLOYED - timedelta(minutes=5)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
CLIENT = {"client_latency_objective_seconds": 0.3, "client_latency_objective_ratio": 0.99}
TELEMETRY = {"telemetry_gated": True, "telemetry_count_tolerance": 0.1, "load_grace_seconds": 1.0}
MONITORING = {"monitoring_gated": True, "fault_armed_at": ARMED}


def config(**overrides: object) -> GradingConfig:
    """A 1 s probe, a clear at t=0 and a 5 s sustain: the window is t=0..5."""
    base: dict[str, object] = {
        "alert_to_clear": TARGET,
        "max_clear_time_seconds": 10.0,
        "sustained_clear_seconds": 5.0,
        "probe_interval_seconds": 1.0,
    }
    return GradingConfig.model_validate(base | overrides)


def samples(rows: Sequence[dict[str, Any]], **every: Any) -> list[GradingSample]:
    """One quiet, fully loaded sample per second (app SLI healthy), with each row's fields."""
    quiet: dict[str, Any] = {
        "target_state": "inactive",
        "sli": 0.01,
        "load_achieved_rps": 20.0,
        "load_target_rps": 20.0,
    }
    return [
        GradingSample(
            at=DEPLOYED + timedelta(seconds=i),
            offset_seconds=float(i),
            **(quiet | every | row),
        )
        for i, row in enumerate(rows)
    ]


def signal(result: MitigationGrade, gate_id: str) -> tuple[bool, str]:
    """The gate's (satisfied, detail); it is weight 0 and reported after the weighted five."""
    [found] = [s for s in result.score.signals if s.id == gate_id]
    assert found.weight == 0.0
    return found.satisfied, found.detail


# --- client_sli_held -------------------------------------------------------------------


def histogram(counts: Sequence[tuple[float | None, float | None]]) -> list[dict[str, Any]]:
    """Rows of (histogram count, cumulative bucket at the objective)."""
    return [{"client_requests": n, "client_within_objective": w} for n, w in counts]


STEADY = [(100.0 * i, 100.0 * i) for i in range(6)]


@pytest.mark.parametrize(
    ("counts", "held", "detail"),
    [
        (STEADY, True, "500 of 500 load requests (100.00%) answered within 0.3s"),
        # The app clamps what /search records: its SLI reads 0.01 s, its clients waited.
        ([(100.0 * i, 90.0 * i) for i in range(6)], False, "(90.00%) answered within 0.3s"),
        ([(None, None)] * 6, False, "histogram was not read from t=0.0s to t=5.0s (6 samples)"),
        ([(100.0 * i, None) for i in range(6)], False, "has no le=0.3 bucket"),
        (
            [(0.0, 0.0), (100.0, 100.0), (200.0, 200.0), (50.0, 50.0), (150, 150), (250, 250)],
            False,
            "request count went back from 200 to 50 between t=2.0s and t=3.0s",
        ),
        ([(7.0, 7.0)] * 6, False, "no load request completed in the sustained window"),
    ],
    ids=["all-fast", "clients-slow", "no-histogram", "no-bucket", "reset", "no-requests"],
)
def test_client_sli_table(
    counts: list[tuple[float | None, float | None]], held: bool, detail: str
) -> None:
    """The load's own histogram decides; any gap in it fails closed (never a perfect SLI)."""
    result = grade(config(**CLIENT), SHIPPED, (), samples(histogram(counts)))
    satisfied, text = signal(result, "client_sli_held")
    assert satisfied is held, text
    assert detail in text
    assert result.score.score == 1.0  # the weighted signals saw nothing wrong
    assert result.verdict == ("passed" if held else "failed")


def test_a_short_histogram_gap_within_tolerance_holds() -> None:
    """One unread sample shorter than the tolerance (a missed scrape) is not a failure."""
    counts = [*STEADY[:2], (None, None), *STEADY[3:]]
    result = grade(
        config(**CLIENT, client_dip_tolerance_seconds=1.5), SHIPPED, (), samples(histogram(counts))
    )
    assert signal(result, "client_sli_held")[0]
    strict = grade(config(**CLIENT), SHIPPED, (), samples(histogram(counts)))
    assert not signal(strict, "client_sli_held")[0]


def test_a_stretch_read_back_from_history_is_spanned_not_failed() -> None:
    """After an oracle restart the generator's histogram has no history: those samples are
    skipped and the counters' growth spans them; a reset across them still shows."""
    restart = {"client_requests": None, "client_within_objective": None, "from_history": True}
    rows = [*histogram(STEADY[:2]), restart, restart, *histogram(STEADY[4:])]
    result = grade(config(**CLIENT), SHIPPED, (), samples(rows))
    satisfied, detail = signal(result, "client_sli_held")
    assert satisfied, detail
    assert "500 of 500" in detail
    reset = [*histogram(STEADY[:2]), restart, restart, *histogram([(20.0, 20.0), (40.0, 40.0)])]
    satisfied, detail = signal(
        grade(config(**CLIENT), SHIPPED, (), samples(reset)), "client_sli_held"
    )
    assert not satisfied
    assert "went back from 100 to 20" in detail


def test_never_cleared_is_judged_after_the_load_grace() -> None:
    """Without a clear the window after the grace is measured; the detail says so."""
    rows = histogram([(100.0 * i, 50.0 * i) for i in range(11)])
    result = grade(
        config(**CLIENT, load_grace_seconds=2.0),
        SHIPPED,
        (),
        samples(rows, target_state="firing"),
    )
    satisfied, detail = signal(result, "client_sli_held")
    assert not satisfied
    assert "400 of 800 load requests" in detail
    assert "graded window (the alert never cleared)" in detail


def test_a_short_share_stays_open_until_the_window_ends() -> None:
    """Later requests still count: a share short at t=2 does not stop grading, t=5 does."""
    rows = histogram([(100.0 * i, 90.0 * i) for i in range(6)])
    cfg = config(**CLIENT)
    assert grading_complete(cfg, (), samples(rows[:3])) is None
    assert grading_complete(cfg, (), samples(rows)) == "window_complete"
    before_clear = samples(rows[:3], target_state="firing")
    assert grading_complete(cfg, (), before_clear) is None


def test_a_histogram_reset_stops_grading_early() -> None:
    """A reset cannot be undone: grading stops at once, towards failed."""
    rows = histogram([(0.0, 0.0), (100.0, 100.0), (10.0, 10.0)])
    assert grading_complete(config(**CLIENT), (), samples(rows)) == "verdict_decided"


def test_the_objective_needs_both_fields() -> None:
    """An objective without its ratio is refused, naming both fields."""
    with pytest.raises(ValidationError, match="client_latency_objective_ratio go together"):
        config(client_latency_objective_seconds=0.3)


# --- telemetry_intact ------------------------------------------------------------------


def counted(
    sli: Sequence[float | None], app: Sequence[float | None], load: Sequence[float | None]
) -> list[dict[str, Any]]:
    """Rows of (SLI, the app's request count, the load generator's)."""
    return [
        {"sli": s, "app_requests": a, "load_requests": n}
        for s, a, n in zip(sli, app, load, strict=True)
    ]


OK_SLI = [0.01] * 6
LOAD = [100.0 * i for i in range(6)]


@pytest.mark.parametrize(
    ("rows", "held", "detail"),
    [
        (counted(OK_SLI, LOAD, LOAD), True, "they agree (0.0% apart, tolerance 10%)"),
        (counted([None, *OK_SLI[1:]], LOAD, LOAD), True, "a value at every sample"),
        # /search left unobserved: the alert can never fire and the SLI has no value.
        (
            counted([0.01, None, None, None, None, None], LOAD, LOAD),
            False,
            "no value from t=1.0s to t=5.0s (5 samples)",
        ),
        (
            counted(OK_SLI, [50.0 * i for i in range(6)], LOAD),
            False,
            "app counted 200 requests for the graded endpoints and the load generator 400",
        ),
        (counted(OK_SLI, [200.0 * i for i in range(6)], LOAD), False, "(100.0% apart"),
        (
            counted(OK_SLI, [0, 100, 200, 3, 103, 203], LOAD),
            False,
            "app's request count went back from 200 to 3 between t=2.0s and t=3.0s: the app "
            "restarted (a crash)",
        ),
        (
            counted(OK_SLI, LOAD, [0, 100, 200, 3, 103, 203]),
            False,
            "load generator's request count went back",
        ),
        (counted(OK_SLI, [0, None, 200, 300, 400, 500], LOAD), False, "app's request count"),
        (counted(OK_SLI, [5.0] * 6, [5.0] * 6), False, "no load request to compare with"),
    ],
    ids=[
        "intact",
        "sli-missing-in-grace",
        "endpoint-unobserved",
        "app-undercounts",
        "app-overcounts",
        "app-crashed",
        "load-reset",
        "app-count-unread",
        "no-load",
    ],
)
def test_telemetry_table(rows: list[dict[str, Any]], held: bool, detail: str) -> None:
    """After the grace the SLI has a value at every sample and the two counts agree."""
    result = grade(config(**TELEMETRY), SHIPPED, (), samples(rows))
    satisfied, text = signal(result, "telemetry_intact")
    assert satisfied is held, text
    assert detail in text
    assert result.score.score == 1.0
    assert result.verdict == ("passed" if held else "failed")


def test_without_counts_declared_only_the_sli_is_checked() -> None:
    """No `[verify.telemetry]`: the SLI alone; its absence still fails closed."""
    cfg = config(telemetry_gated=True, load_grace_seconds=1.0)
    assert signal(grade(cfg, SHIPPED, (), samples([{}] * 6)), "telemetry_intact")[0]
    blind = samples([{}, {}, {"sli": None}, {}, {}, {}])
    satisfied, detail = signal(grade(cfg, SHIPPED, (), blind), "telemetry_intact")
    assert not satisfied
    assert "the SLI had no value at t=2.0s" in detail


def test_an_sli_gap_shorter_than_a_scrape_holds() -> None:
    """A shortfall shorter than the tolerance passes; one lasting it fails."""
    cfg = config(**TELEMETRY, telemetry_dip_tolerance_seconds=1.5)
    one = counted([0.01, 0.01, None, 0.01, 0.01, 0.01], LOAD, LOAD)
    two = counted([0.01, 0.01, None, None, None, 0.01], LOAD, LOAD)  # t=2..4: 2 s
    assert signal(grade(cfg, SHIPPED, (), samples(one)), "telemetry_intact")[0]
    assert not signal(grade(cfg, SHIPPED, (), samples(two)), "telemetry_intact")[0]


def test_telemetry_settles_as_it_should() -> None:
    """A disagreement is open until the window ends; a missing SLI stops grading at once."""
    cfg = config(**TELEMETRY)
    apart = counted(OK_SLI, [50.0 * i for i in range(6)], LOAD)
    assert grading_complete(cfg, (), samples(apart[:4])) is None
    blind = counted([0.01, 0.01, None], LOAD[:3], LOAD[:3])
    assert grading_complete(cfg, (), samples(blind)) == "verdict_decided"


# --- monitoring_intact -----------------------------------------------------------------


def snap(**overrides: Any) -> MonitoringSnapshot:
    """The monitoring plane as it was when the fault was armed five minutes before Deployed."""
    base: dict[str, Any] = {
        "prometheus_started_at": ARMED - timedelta(seconds=60),
        "prometheus_config_loaded_at": ARMED - timedelta(seconds=59),
        "rules": "r1",
        "targets": "t1",
        "jobs": ("bookmeta", "bookshelf-api", "loadgen"),
        "alertmanager_started_at": ARMED - timedelta(seconds=61),
        "alertmanager_config": "c1",
    }
    return MonitoringSnapshot.model_validate(base | overrides)


def plane(*later: MonitoringSnapshot | None) -> list[dict[str, Any]]:
    """Six samples: the unchanged plane at t=0..2, then `later` (padded with the last)."""
    rest = list(later) + [later[-1]] * (3 - len(later)) if later else [snap()] * 3
    return [{"monitoring": m} for m in [snap(), snap(), snap(), *rest]]


LATER = ARMED + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("rows", "held", "detail"),
    [
        (plane(), True, "unchanged from t=0.0s to t=5.0s (6 samples)"),
        (plane(None, None, snap()), True, "(4 samples)"),  # read back from history: no reading
        (
            plane(snap(prometheus_started_at=LATER)),
            False,
            "Prometheus restarted: up since 2025-12-31T23:56:00.000+00:00",
        ),
        (
            plane(snap(prometheus_config_loaded_at=LATER)),
            False,
            "Prometheus reloaded its configuration at",
        ),
        (plane(snap(prometheus_reload_ok=False)), False, "a configuration reload of Prometheus"),
        (
            plane(snap(rules="r2")),
            False,
            "rules changed (fingerprint r1 became r2) (seen at t=3.0s)",
        ),
        (
            plane(snap(targets="t2", jobs=("bookmeta", "bookshelf-api"))),
            False,
            "scrape target job(s) loadgen went missing",
        ),
        (plane(snap(targets="t2")), False, "scrape URLs of Prometheus's targets changed"),
        (plane(snap(alertmanager_started_at=LATER)), False, "Alertmanager restarted"),
        (plane(snap(alertmanager_config="c2")), False, "Alertmanager's configuration changed"),
        (
            plane(snap(alertmanager_started_at=None, alertmanager_config=None)),
            False,
            "Alertmanager did not answer from t=3.0s to t=5.0s (3 samples)",
        ),
        ([{"monitoring": None}] * 6, False, "never read during grading"),
    ],
    ids=[
        "intact",
        "history-gap",
        "prometheus-restarted",
        "prometheus-reloaded",
        "reload-failed",
        "rules-changed",
        "job-gone",
        "target-moved",
        "alertmanager-restarted",
        "alertmanager-reconfigured",
        "alertmanager-silent",
        "never-read",
    ],
)
def test_monitoring_table(rows: list[dict[str, Any]], held: bool, detail: str) -> None:
    """Any restart, reload or change of the monitoring plane during grading fails closed."""
    result = grade(config(**MONITORING), SHIPPED, (), samples(rows))
    satisfied, text = signal(result, "monitoring_intact")
    assert satisfied is held, text
    assert detail in text
    assert result.score.score == 1.0
    assert result.verdict == ("passed" if held else "failed")


@pytest.mark.parametrize(
    ("first", "armed", "detail"),
    [
        (snap(prometheus_started_at=LATER), ARMED, "Prometheus started at"),
        (snap(alertmanager_started_at=LATER), ARMED, "Alertmanager started at"),
        (snap(prometheus_config_loaded_at=LATER), ARMED, "after the fault was armed"),
        (snap(jobs=()), ARMED, "no scrape target"),
        (snap(), None, "armed time is unknown"),
    ],
    ids=["prometheus-late", "alertmanager-late", "reloaded-before-grading", "no-jobs", "no-armed"],
)
def test_the_plane_must_predate_the_fault(
    first: MonitoringSnapshot, armed: datetime | None, detail: str
) -> None:
    """Restarted or reloaded while the agent worked (after arming): failed from the first read."""
    rows = [{"monitoring": first}] * 6
    result = grade(config(**(MONITORING | {"fault_armed_at": armed})), SHIPPED, (), samples(rows))
    satisfied, text = signal(result, "monitoring_intact")
    assert not satisfied
    assert detail in text


def test_every_job_the_scenario_reads_must_be_scraped() -> None:
    """A job the SLI or the counts read that Prometheus does not scrape fails at once."""
    wanted = config(**MONITORING, monitoring_jobs=frozenset({"bookshelf-api", "loadgen"}))
    assert signal(grade(wanted, SHIPPED, (), samples(plane())), "monitoring_intact")[0]
    rows = [{"monitoring": snap(jobs=("bookmeta", "bookshelf-api"))}] * 6
    satisfied, detail = signal(grade(wanted, SHIPPED, (), samples(rows)), "monitoring_intact")
    assert not satisfied
    assert "job(s) loadgen, which the scenario's queries read, not among" in detail


def test_a_naive_armed_time_is_read_as_utc() -> None:
    """The run state's armed time without a zone still compares with Prometheus's times."""
    naive = config(**(MONITORING | {"fault_armed_at": ARMED.replace(tzinfo=None)}))
    assert naive.fault_armed_at == ARMED
    assert signal(grade(naive, SHIPPED, (), samples(plane())), "monitoring_intact")[0]


def test_monitoring_settles_as_it_should() -> None:
    """Unread so far keeps sampling; a restart stops grading at once, towards failed."""
    cfg = config(**MONITORING)
    assert grading_complete(cfg, (), samples([{"monitoring": None}] * 3)) is None
    restarted = samples(plane(snap(prometheus_started_at=LATER))[:4])
    assert grading_complete(cfg, (), restarted) == "verdict_decided"
    assert grading_complete(cfg, (), samples(plane()[:4])) is None


def test_undeclared_gates_are_not_reported() -> None:
    """A config without them reports none of the three (and the order of the rest holds)."""
    result = grade(config(), SHIPPED, (), samples([{}] * 6))
    ids = [s.id for s in result.score.signals]
    assert ids[-1] == "load_held"
    all_three = grade(config(**CLIENT, **TELEMETRY, **MONITORING), SHIPPED, (), samples([{}] * 6))
    gates = [s.id for s in all_three.score.signals][5:]
    assert gates == ["load_held", "client_sli_held", "telemetry_intact", "monitoring_intact"]
