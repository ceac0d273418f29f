"""The grading loop: cadence, stopping, probe failures and resuming, on a virtual clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sreforge_contracts import AlertState
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    GradingError,
    GradingSample,
    ObservedAlert,
    ProbeError,
    probe_interval_for,
    run_grading,
)

TARGET = "ApiLatencyHigh"
DEPLOYED = datetime(2026, 1, 1, tzinfo=UTC)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
STATES: dict[str, AlertState] = {"F": "firing", "P": "pending", "I": "inactive"}
CONFIG = GradingConfig(
    alert_to_clear=TARGET,
    max_clear_time_seconds=10.0,
    sustained_clear_seconds=5.0,
    probe_interval_seconds=1.0,
)


class VirtualClock:
    """Time that only moves when the loop sleeps or a probe takes time."""

    def __init__(self) -> None:
        self.now_at = DEPLOYED
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.now_at

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now_at += timedelta(seconds=seconds)


class ScriptedPrometheus:
    """A sample source replaying one target state per whole second; for the loop only."""

    def __init__(
        self,
        clock: VirtualClock,
        states: str,
        *,
        latency: float = 0.0,
        down: frozenset[int] = frozenset(),
    ) -> None:
        self.clock, self.states, self.latency, self.down = clock, states, latency, down
        self.calls = 0

    async def sample(self, *, at: datetime, offset_seconds: float) -> GradingSample:
        self.calls += 1
        self.clock.now_at += timedelta(seconds=self.latency)
        second = int(offset_seconds)
        if second in self.down:
            raise ProbeError("connection refused", endpoint="http://127.0.0.1:1/api/v1/alerts")
        state = STATES[self.states[min(second, len(self.states) - 1)]]
        alerts = () if state == "inactive" else (ObservedAlert(name=TARGET, state=state),)
        return GradingSample(
            at=at,
            offset_seconds=offset_seconds,
            target_state=state,
            alerts=alerts,
            sli=0.1,
            load_achieved_rps=20.0,
            load_target_rps=20.0,
        )


async def test_loop_samples_each_interval_and_stops_at_the_window_end() -> None:
    """One sample per probe interval from Deployed until first clear + sustained window."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "FFIIIIIIIIII")
    result = await run_grading(
        source, CONFIG, SHIPPED, (), started_at=DEPLOYED, now=clock.now, sleep=clock.sleep
    )
    assert [s.offset_seconds for s in result.sli_series] == [float(i) for i in range(8)]
    assert result.verdict == "passed"
    assert result.stop_reason == "window_complete"


async def test_probe_latency_does_not_stretch_the_interval() -> None:
    """The next probe starts one interval after the previous one started, not after it ended."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "FIIIIII", latency=0.25)
    result = await run_grading(
        source, CONFIG, SHIPPED, (), started_at=DEPLOYED, now=clock.now, sleep=clock.sleep
    )
    assert set(clock.sleeps) == {0.75}
    assert [s.offset_seconds for s in result.sli_series][:3] == [0.0, 1.0, 2.0]


async def test_fail_closed_outcomes_never_probe() -> None:
    """Red CI is decided without touching Prometheus."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "F")
    red = DeliveryOutcome(submitted=True, ci_green=False, redeployed=False)
    result = await run_grading(
        source, CONFIG, red, (), started_at=DEPLOYED, now=clock.now, sleep=clock.sleep
    )
    assert result.verdict == "rejected"
    assert source.calls == 0


async def test_a_short_probe_outage_leaves_a_hole_that_fails_closed() -> None:
    """Probe errors are not zeros: the unobserved stretch fails the signals that need it."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "FIIIIIIIII", down=frozenset({2, 3, 4, 5}))
    result = await run_grading(
        source, CONFIG, SHIPPED, (), started_at=DEPLOYED, now=clock.now, sleep=clock.sleep
    )
    assert result.verdict == "failed"
    details = {s.id: s.detail for s in result.score.signals}
    assert "not observed from t=1.0s to t=6.0s" in details["sustained_clear"]


async def test_a_long_probe_outage_raises_grading_error() -> None:
    """When Prometheus stays unreachable past the budget, grading errors instead of guessing."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "F" * 20, down=frozenset(range(1, 20)))
    with pytest.raises(GradingError, match="connection refused"):
        await run_grading(
            source,
            CONFIG,
            SHIPPED,
            (),
            started_at=DEPLOYED,
            now=clock.now,
            sleep=clock.sleep,
            give_up_after_seconds=4.0,
        )
    assert source.calls == 6


async def test_resume_with_prior_samples_and_report_each_new_one() -> None:
    """A restarted grading continues from persisted samples; on_sample sees only new ones."""
    clock = VirtualClock()
    first = ScriptedPrometheus(clock, "FIIIIIIIII")
    prior = [
        await first.sample(at=DEPLOYED + timedelta(seconds=i), offset_seconds=float(i))
        for i in range(3)
    ]
    clock.now_at = DEPLOYED + timedelta(seconds=3)
    seen: list[float] = []

    async def record(sample: GradingSample) -> None:
        seen.append(sample.offset_seconds)

    result = await run_grading(
        ScriptedPrometheus(clock, "FIIIIIIIII"),
        CONFIG,
        SHIPPED,
        (),
        started_at=DEPLOYED,
        now=clock.now,
        sleep=clock.sleep,
        prior_samples=prior,
        on_sample=record,
    )
    assert seen == [3.0, 4.0, 5.0, 6.0]
    assert len(result.sli_series) == 7
    assert result.verdict == "passed"


@pytest.mark.parametrize(
    ("scale", "eval_interval", "expected"), [(1.0, 5.0, 1.0), (0.1, 0.5, 0.1), (1.0, 0.5, 0.5)]
)
def test_probe_interval_is_scaled_and_never_coarser_than_eval(
    scale: float, eval_interval: float, expected: float
) -> None:
    """1 s x time scale, capped at the Prometheus evaluation interval."""
    assert probe_interval_for(scale, eval_interval) == pytest.approx(expected)


class History:
    """A gap filler replaying what Prometheus recorded: the same script, one sample a second."""

    def __init__(self, clock: VirtualClock, states: str, *, fails: bool = False) -> None:
        self.script = ScriptedPrometheus(clock, states)
        self.fails = fails
        self.asked: list[tuple[float, float]] = []

    async def fill(self, start: datetime, end: datetime) -> list[GradingSample]:
        self.asked.append(((start - DEPLOYED).total_seconds(), (end - DEPLOYED).total_seconds()))
        if self.fails:
            raise ProbeError("connection refused", endpoint="http://127.0.0.1:1/api/v1/query_range")
        seconds = range(
            int((start - DEPLOYED).total_seconds()), int((end - DEPLOYED).total_seconds()) + 1
        )
        return [
            await self.script.sample(at=DEPLOYED + timedelta(seconds=s), offset_seconds=float(s))
            for s in seconds
        ]


async def test_a_resume_fills_the_unwatched_stretch_and_reports_it() -> None:
    """After a restart at t=6 with samples up to t=2, t=3..5 come from the filler, in order."""
    clock = VirtualClock()
    first = ScriptedPrometheus(clock, "FIIIIIIIII")
    prior = [
        await first.sample(at=DEPLOYED + timedelta(seconds=i), offset_seconds=float(i))
        for i in range(3)
    ]
    clock.now_at = DEPLOYED + timedelta(seconds=6)
    history = History(clock, "FIIIIIIIII")
    seen: list[float] = []

    async def record(sample: GradingSample) -> None:
        seen.append(sample.offset_seconds)

    result = await run_grading(
        ScriptedPrometheus(clock, "FIIIIIIIII"),
        CONFIG,
        SHIPPED,
        (),
        started_at=DEPLOYED,
        now=clock.now,
        sleep=clock.sleep,
        prior_samples=prior,
        on_sample=record,
        fill_gap=history.fill,
    )
    assert history.asked == [(3.0, 5.5)]
    assert seen == [3.0, 4.0, 5.0, 6.0]
    assert [s.offset_seconds for s in result.sli_series] == [float(i) for i in range(7)]
    assert result.verdict == "passed"


async def test_a_late_start_is_filled_from_deployed_on() -> None:
    """No samples yet and the first probe at t=4: the filler covers t=0 up to it."""
    clock = VirtualClock()
    clock.now_at = DEPLOYED + timedelta(seconds=4)
    history = History(clock, "FIIIIIIIII")
    result = await run_grading(
        ScriptedPrometheus(clock, "FIIIIIIIII"),
        CONFIG,
        SHIPPED,
        (),
        started_at=DEPLOYED,
        now=clock.now,
        sleep=clock.sleep,
        fill_gap=history.fill,
    )
    assert history.asked == [(0.0, 3.5)]
    assert [s.offset_seconds for s in result.sli_series][:5] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert result.verdict == "passed"


async def test_history_that_cannot_be_read_leaves_the_hole_failing_closed() -> None:
    """A filler that fails changes nothing: the stretch stays unobserved and the run fails."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "FIIIIIIIII", down=frozenset({2, 3, 4, 5}))
    history = History(clock, "FIIIIIIIII", fails=True)
    result = await run_grading(
        source,
        CONFIG,
        SHIPPED,
        (),
        started_at=DEPLOYED,
        now=clock.now,
        sleep=clock.sleep,
        fill_gap=history.fill,
    )
    assert history.asked == [(2.0, 5.5)]
    assert result.verdict == "failed"
    details = {s.id: s.detail for s in result.score.signals}
    assert "not observed from t=1.0s to t=6.0s" in details["sustained_clear"]


async def test_a_refire_seen_only_in_history_fails_the_run() -> None:
    """The filled stretch is evidence like any other: a re-fire there fails sustained_clear."""
    clock = VirtualClock()
    source = ScriptedPrometheus(clock, "FIIIIIIIII", down=frozenset({2, 3, 4, 5}))
    history = History(clock, "FIIFIIIIII")
    result = await run_grading(
        source,
        CONFIG,
        SHIPPED,
        (),
        started_at=DEPLOYED,
        now=clock.now,
        sleep=clock.sleep,
        fill_gap=history.fill,
    )
    assert result.verdict == "failed"
    assert "firing" in [s.alert_state for s in result.sli_series[2:5]]
    assert not {s.id: s for s in result.score.signals}["sustained_clear"].satisfied
