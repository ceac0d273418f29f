"""`harness_unstarved`: a run the harness starved ends `error`, never `failed`.

A correct fix on an overloaded host misses its objectives because the harness could not
keep up (issue 28: the reference fix judged `failed` at load average 38). The judgement is
pure: the host's measures in, starved or not (and whose doing) out. Starvation needs a
symptom (the harness or the service running late) and a busy machine; a service that keeps
the machine busy itself, running into its CPU limit, owns its failure.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    HarnessMeasures,
    HarnessStarved,
    HostReader,
    StarvationBounds,
    grade,
    judge_starvation,
    measure_starvation,
)
from sreforge_oracle._exposition import read_loadgen
from sreforge_oracle._window import window_of

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
BOUNDS = StarvationBounds()


def measures(**values: float) -> HarnessMeasures:
    return HarnessMeasures(start=2.0, end=20.0, **values)  # type: ignore[arg-type]


QUIET = {"loadgen_late_ratio": 0.0, "cpu_pressure_percent": 10.0, "service_cpu_wait_ratio": 0.05}


@pytest.mark.parametrize(
    ("values", "starved", "harness_fault", "named"),
    [
        pytest.param(QUIET, False, False, [], id="quiet-host"),
        pytest.param(
            QUIET | {"loadgen_late_ratio": 0.4}, False, False, [], id="lag-on-an-idle-machine"
        ),
        pytest.param(
            QUIET | {"cpu_pressure_percent": 99.0}, False, False, [], id="busy-but-kept-up"
        ),
        pytest.param(
            QUIET | {"loadgen_late_ratio": 0.4, "cpu_pressure_percent": 95.0},
            True,
            True,
            ["sent 40% of its arrivals more than 0.25s late", "CPU pressure averaged 95%"],
            id="load-late-machine-busy",
        ),
        pytest.param(
            QUIET | {"probe_late_ratio": 0.5, "cpu_pressure_percent": 90.0},
            True,
            True,
            ["took 50% of its samples", "CPU pressure averaged 90%"],
            id="oracle-late-machine-busy",
        ),
        pytest.param(
            QUIET | {"service_cpu_wait_ratio": 0.8, "cpu_pressure_percent": 99.0},
            True,
            True,
            ["waited for a CPU 80%"],
            id="service-waiting-machine-busy",
        ),
        pytest.param(
            QUIET | {"service_cpu_wait_ratio": 0.8}, False, False, [], id="service-waiting-alone"
        ),
        pytest.param(
            QUIET | {"scrape_seconds": 1.5, "cpu_pressure_percent": 90.0},
            True,
            True,
            ["scrapes of the harness took 1.50s"],
            id="scrapes-slow-machine-busy",
        ),
        pytest.param(
            QUIET | {"loadgen_late_ratio": 0.05, "cpu_pressure_percent": 85.0},
            False,
            False,
            [],
            id="at-the-bounds-is-within",
        ),
        pytest.param(
            QUIET
            | {
                "loadgen_late_ratio": 0.4,
                "cpu_pressure_percent": 95.0,
                "service_throttled_ratio": 0.9,
                "service_cpu_limit_cores": 1.0,
            },
            True,
            False,
            ["its CPU limit (1 cores) throttled it 90%"],
            id="the-service-burned-its-own-limit",
        ),
        pytest.param(
            QUIET
            | {
                "service_cpu_wait_ratio": 0.91,
                "cpu_pressure_percent": 93.0,
                "service_throttled_ratio": 0.15,
                "service_cpu_cores": 0.98,
                "service_cpu_limit_cores": 1.0,
            },
            True,
            False,
            ["it used 98% of its CPU limit (1 cores)"],
            id="the-service-at-its-limit-waits-for-itself",
        ),
        pytest.param(
            QUIET
            | {
                "loadgen_late_ratio": 0.4,
                "cpu_pressure_percent": 95.0,
                "service_throttled_ratio": 0.1,
                "service_cpu_cores": 0.1,
                "service_cpu_limit_cores": 1.0,
            },
            True,
            True,
            ["CPU pressure averaged 95%"],
            id="throttled-a-little-is-not-its-doing",
        ),
    ],
)
def test_starvation_needs_a_harness_symptom_and_a_busy_machine_not_of_the_services_making(
    values: dict[str, float], starved: bool, harness_fault: bool, named: list[str]
) -> None:
    """Each row: the window's measures, and the judgement with the words that explain it."""
    judged = judge_starvation(measures(**values), BOUNDS)
    assert (judged.starved, judged.harness_fault) == (starved, harness_fault)
    text = judged.reason() + judged.signal().detail
    for words in named:
        assert words in text
    assert judged.signal().satisfied is not starved
    assert judged.signal().weight == 0.0


def config(**overrides: object) -> GradingConfig:
    base: dict[str, object] = {
        "alert_to_clear": TARGET,
        "max_clear_time_seconds": 10.0,
        "sustained_clear_seconds": 5.0,
        "probe_interval_seconds": 1.0,
        "load_grace_seconds": 1.0,
        "load_dip_tolerance_seconds": 1.0,
    }
    return GradingConfig.model_validate(base | overrides)


def series(
    states: str,
    *,
    late_per_second: float = 0.0,
    pressure: float = 5.0,
    throttled_per_second: float | None = None,
    offsets: list[float] | None = None,
) -> list[GradingSample]:
    """One sample a second (or at `offsets`): `states` F firing / I inactive; 20 arrivals a
    second, `late_per_second` of them late; the machine's pressure; the service throttled
    that many seconds a second (`None`: no CPU cgroup)."""
    out = []
    for i, state in enumerate(states):
        at = offsets[i] if offsets is not None else float(i)
        host: dict[str, object] = {}
        if throttled_per_second is not None:
            host = {
                "service_cpu_seconds": 0.9 * at,
                "service_cpu_wait_seconds": 0.9 * at,
                "service_throttled_seconds": throttled_per_second * at,
                "service_cpu_limit_cores": 1.0,
            }
        out.append(
            GradingSample.model_validate(
                {
                    "at": DEPLOYED + timedelta(seconds=at),
                    "offset_seconds": at,
                    "target_state": "firing" if state == "F" else "inactive",
                    "sli": 0.1,
                    "load_achieved_rps": 20.0,
                    "load_target_rps": 20.0,
                    "loadgen_arrivals": 20.0 * at,
                    "loadgen_arrivals_on_time": (20.0 - late_per_second) * at,
                    "cpu_pressure_percent": pressure,
                    **host,
                }
            )
        )
    return out


NEVER_CLEARS = "F" * 12
CLEARS = "FF" + "I" * 10


def test_a_failing_run_on_a_starved_host_ends_error_naming_the_measures() -> None:
    """The reference fix on an overloaded host: the alert still fires, the load is late."""
    samples = series(NEVER_CLEARS, late_per_second=8.0, pressure=97.0)
    with pytest.raises(HarnessStarved) as raised:
        grade(config(), SHIPPED, (), samples)
    reason = str(raised.value)
    assert "sent 40% of its arrivals more than 0.25s late" in reason
    assert "CPU pressure averaged 97%" in reason


def test_a_passing_run_on_a_starved_host_stays_passed_and_says_so() -> None:
    """A fix that held even on a starved host is a fix; the record shows the starvation."""
    result = grade(config(), SHIPPED, (), series(CLEARS, late_per_second=8.0, pressure=97.0))
    assert result.verdict == "passed"
    host = result.score.signals[-1]
    assert (host.id, host.satisfied, host.weight) == ("harness_unstarved", False, 0.0)
    assert "a passing run stands" in host.detail


def test_a_service_that_starves_the_host_through_its_own_limit_fails() -> None:
    """An agent whose service burns its CPU limit cannot turn its `failed` into a rerun."""
    samples = series(NEVER_CLEARS, late_per_second=8.0, pressure=97.0, throttled_per_second=0.8)
    result = grade(config(), SHIPPED, (), samples)
    assert result.verdict == "failed"
    host = result.score.signals[-1]
    assert host.id == "harness_unstarved"
    assert not host.satisfied
    assert "starved by the service itself" in host.detail
    assert "throttled it 80%" in host.detail


def test_a_failing_run_on_a_quiet_host_stays_failed_and_records_the_measures() -> None:
    result = grade(config(), SHIPPED, (), series(NEVER_CLEARS))
    assert result.verdict == "failed"
    host = result.score.signals[-1]
    assert host.id == "harness_unstarved"
    assert host.satisfied
    assert "load arrivals > 0.25s late 0.0% of 180" in host.detail


def test_unmeasured_hosts_report_no_starvation_signal() -> None:
    """Samples without any host measure (history, an old journal) are judged as before."""
    bare = [s.model_copy(update={"cpu_pressure_percent": None, "loadgen_arrivals": None})
            for s in series(NEVER_CLEARS)]  # fmt: skip
    result = grade(config(), SHIPPED, (), bare)
    assert result.verdict == "failed"
    assert all(s.id != "harness_unstarved" for s in result.score.signals)


def test_late_oracle_samples_are_measured_from_their_offsets() -> None:
    """Two of the six intervals from the grace (t=1) to the window's end (t=10) started
    1.5 s past their schedule (2.5 s apart, not 1 s)."""
    offsets = [0.0, 1.0, 2.0, 3.0, 5.5, 8.0, 9.0, 10.0]
    samples = series("F" * len(offsets), offsets=offsets)
    found = measure_starvation(config(), window_of(config(), samples))
    assert found is not None
    assert found.probe_intervals == 6
    assert found.probe_late_ratio == pytest.approx(2 / 6)


def test_a_reset_load_counter_is_left_out_not_read_as_negative() -> None:
    """The generator restarted mid-window: its counters fall; the stretch across is skipped."""
    samples = series(NEVER_CLEARS, late_per_second=2.0)
    reset = [
        s.model_copy(update={"loadgen_arrivals": 20.0, "loadgen_arrivals_on_time": 18.0})
        if s.offset_seconds == 6.0
        else s
        for s in samples
    ]
    found = measure_starvation(config(), window_of(config(), reset))
    assert found is not None
    assert found.loadgen_late_ratio is not None
    assert found.loadgen_late_ratio == pytest.approx(0.1)


def test_history_samples_carry_no_host_measure() -> None:
    samples = [s.model_copy(update={"from_history": True}) for s in series(NEVER_CLEARS)]
    assert measure_starvation(config(), window_of(config(), samples)) is None


def test_the_host_reader_sums_thread_times_over_the_runs_cpu_cgroups(tmp_path: Path) -> None:
    """A thread's run and wait times count from their rises; a thread that ends takes
    nothing back; the cgroup's throttled time and quota are read as they are."""
    group = tmp_path / "cg" / "sreforge-run1-api"
    group.mkdir(parents=True)
    (tmp_path / "cg" / "sreforge-run2-api").mkdir()
    (group / "cpu.cfs_quota_us").write_text("100000\n")
    (group / "cpu.cfs_period_us").write_text("100000\n")
    pressure = tmp_path / "pressure"
    pressure.write_text("some avg10=42.50 avg60=1.00 avg300=0.00 total=1\nfull avg10=0.00\n")
    proc = tmp_path / "proc"

    def state(threads: dict[int, tuple[int, int]], throttled_ns: int) -> None:
        (group / "tasks").write_text("".join(f"{tid}\n" for tid in threads))
        (group / "cpu.stat").write_text(f"nr_periods 10\nthrottled_time {throttled_ns}\n")
        for tid, (run, wait) in threads.items():
            (proc / str(tid)).mkdir(parents=True, exist_ok=True)
            (proc / str(tid) / "schedstat").write_text(f"{run} {wait} 7\n")

    reader = HostReader("run1", cgroup_root=tmp_path / "cg", pressure=pressure, proc=proc)
    state({1: (1_000_000_000, 0), 2: (0, 0)}, 0)
    first = reader.read()
    state({1: (1_500_000_000, 250_000_000), 2: (2_000_000_000, 0)}, 300_000_000)
    second = reader.read()
    state({1: (1_600_000_000, 250_000_000)}, 400_000_000)  # thread 2 ended
    third = reader.read()
    assert first.cpu_pressure_percent == 42.5
    assert (first.service_cpu_seconds, first.service_cpu_wait_seconds) == (0.0, 0.0)
    assert second.service_cpu_seconds == pytest.approx(2.5)
    assert second.service_cpu_wait_seconds == pytest.approx(0.25)
    assert third.service_cpu_seconds == pytest.approx(2.6)
    assert third.service_throttled_seconds == pytest.approx(0.4)
    assert third.service_cpu_limit_cores == 1.0


def test_the_host_reader_without_a_cpu_cgroup_reads_the_pressure_only(tmp_path: Path) -> None:
    reader = HostReader("run1", cgroup_root=tmp_path, pressure=tmp_path / "absent")
    reading = reader.read()
    assert reading.cpu_pressure_percent is None
    assert reading.service_cpu_seconds is None


def test_the_schedule_lag_histogram_is_read_at_the_lag_bound() -> None:
    text = (
        'loadgen_schedule_lag_seconds_bucket{le="0.1"} 90.0\n'
        'loadgen_schedule_lag_seconds_bucket{le="0.25"} 95.0\n'
        'loadgen_schedule_lag_seconds_bucket{le="+Inf"} 100.0\n'
        "loadgen_schedule_lag_seconds_count 100.0\n"
    )
    reading = read_loadgen(text, "http://loadgen/metrics", None, 0.25)
    assert (reading.arrivals, reading.arrivals_on_time) == (100.0, 95.0)


def test_the_host_reader_reads_a_cgroup_v2_group_too(tmp_path: Path) -> None:
    """v2 names the same figures differently: `cgroup.threads`, `cpu.max`, `throttled_usec`."""
    group = tmp_path / "sreforge-run1-api"
    group.mkdir()
    (group / "cgroup.threads").write_text("7\n")
    (group / "cpu.max").write_text("50000 100000\n")
    (group / "cpu.stat").write_text("usage_usec 9\nthrottled_usec 2500000\n")
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "schedstat").write_text("5 6 7\n")
    reading = HostReader("run1", cgroup_root=tmp_path, pressure=tmp_path / "none", proc=tmp_path)
    found = reading.read()
    assert found.service_throttled_seconds == pytest.approx(2.5)
    assert found.service_cpu_limit_cores == 0.5
    assert found.service_cpu_seconds == 0.0
