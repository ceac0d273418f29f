"""`harness_unstarved`: was the host too busy to judge the run? Pure: measures in, a judgement out.

A correct fix on a starved host misses its objectives: the load generator sends late, the
oracle samples late, Prometheus scrapes late, and the answers are slow because the service
waits for a CPU. Charging that to the agent as `failed` would say something false, so a
run that would fail on a starved host ends `error` (a campaign reruns it). Starvation
needs two witnesses: a symptom (the load generator's schedule lag, the oracle's own
lateness, slow harness scrapes, the service waiting in the run queue for a CPU) *and* a
busy machine (its CPU pressure). A symptom alone can be driven by what the service
answers (huge bodies slow the load's checks); a busy machine alone disturbed nothing.
And a machine the service itself keeps busy, running into its own CPU limit, is the fix's
failure: it stays `failed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from sreforge_contracts import OracleSignal

from sreforge_oracle._model import GradingConfig, GradingSample, StarvationBounds
from sreforge_oracle._window import Window

__all__ = ["HarnessMeasures", "Starvation", "judge_starvation", "measure_starvation"]

_ID = "harness_unstarved"


@dataclass(frozen=True)
class HarnessMeasures:
    """How busy the host was over a stretch of the graded window; `None`: not read."""

    start: float
    end: float
    loadgen_arrivals: float | None = None
    loadgen_late_ratio: float | None = None
    probe_intervals: int = 0
    probe_late_ratio: float | None = None
    scrape_seconds: float | None = None
    cpu_pressure_percent: float | None = None
    service_cpu_wait_ratio: float | None = None
    service_throttled_ratio: float | None = None
    service_cpu_cores: float | None = None
    service_cpu_limit_cores: float | None = None

    def describe(self, bounds: StarvationBounds) -> str:
        """Every measure read, with its bound."""
        parts = [f"t={self.start:.1f}s to t={self.end:.1f}s"]
        if self.loadgen_late_ratio is not None:
            parts.append(
                f"load arrivals > {bounds.loadgen_lag_seconds:g}s late "
                f"{self.loadgen_late_ratio:.1%} of {self.loadgen_arrivals or 0:.0f} "
                f"(bound {bounds.loadgen_late_ratio:.0%})"
            )
        if self.probe_late_ratio is not None:
            parts.append(
                f"oracle samples > {bounds.probe_lag_seconds:g}s late "
                f"{self.probe_late_ratio:.0%} of {self.probe_intervals} "
                f"(bound {bounds.probe_late_ratio:.0%})"
            )
        if self.scrape_seconds is not None:
            parts.append(
                f"harness scrape mean {self.scrape_seconds:.3f}s (bound {bounds.scrape_seconds:g}s)"
            )
        if self.cpu_pressure_percent is not None:
            parts.append(
                f"machine CPU pressure (PSI some avg10) mean {self.cpu_pressure_percent:.0f}% "
                f"(bound {bounds.cpu_pressure_percent:.0f}%)"
            )
        if self.service_cpu_wait_ratio is not None:
            parts.append(
                f"service run-queue wait {self.service_cpu_wait_ratio:.0%} of its runnable "
                f"time (bound {bounds.service_cpu_wait_ratio:.0%})"
            )
        if self.service_throttled_ratio is not None:
            cores = self.service_cpu_cores or 0.0
            limit = self.service_cpu_limit_cores
            parts.append(
                f"service throttled {self.service_throttled_ratio:.0%} of the window "
                f"(bound {bounds.service_throttled_ratio:.0%}), using {cores:.2f} cores"
                + ("" if limit is None else f" of its {limit:g}-core limit")
            )
        return "; ".join(parts)


@dataclass(frozen=True)
class Starvation:
    """The judgement: the symptoms and the busy-machine measure past their bounds, and,
    when the service's own CPU use explains them, why (`own`)."""

    symptoms: tuple[str, ...]
    busy: tuple[str, ...]
    own: str | None
    measures: str

    @property
    def starved(self) -> bool:
        """Both witnesses: something the run depends on lagged, and the machine was busy."""
        return bool(self.symptoms) and bool(self.busy)

    @property
    def harness_fault(self) -> bool:
        """Starved, and not by the service's own CPU use: no honest `failed` exists."""
        return self.starved and self.own is None

    def reason(self) -> str:
        """Why a failing run ends `error`: the measures past their bounds and their values."""
        return (
            f"the harness was starved, so a failing verdict would not be the fix's: "
            f"{'; '.join(self.symptoms)}, while {'; '.join(self.busy)} [{self.measures}]"
        )

    def signal(self) -> OracleSignal:
        """The record's `harness_unstarved` (weight 0; never decides a verdict by itself)."""
        if not self.starved:
            detail = f"the host kept up: {self.measures}"
        elif self.own is not None:
            detail = (
                f"starved by the service itself: {self.own}; {'; '.join(self.symptoms)}, "
                f"{'; '.join(self.busy)}: the fix's own doing, judged as observed "
                f"[{self.measures}]"
            )
        else:
            detail = (
                f"starved: {'; '.join(self.symptoms)}, while {'; '.join(self.busy)}; a "
                f"passing run stands, a failing one ends error [{self.measures}]"
            )
        satisfied = not self.starved
        return OracleSignal(
            id=_ID, satisfied=satisfied, value=float(satisfied), weight=0.0, detail=detail
        )


def judge_starvation(measures: HarnessMeasures, bounds: StarvationBounds) -> Starvation:
    """Which measures are past their bounds, and whether the service's own CPU explains it."""
    symptoms: list[str] = []
    busy: list[str] = []
    if _past(measures.loadgen_late_ratio, bounds.loadgen_late_ratio):
        symptoms.append(
            f"the load generator sent {measures.loadgen_late_ratio:.0%} of its arrivals more "
            f"than {bounds.loadgen_lag_seconds:g}s late (bound {bounds.loadgen_late_ratio:.0%})"
        )
    if _past(measures.probe_late_ratio, bounds.probe_late_ratio):
        symptoms.append(
            f"the oracle took {measures.probe_late_ratio:.0%} of its samples more than "
            f"{bounds.probe_lag_seconds:g}s late (bound {bounds.probe_late_ratio:.0%})"
        )
    if _past(measures.scrape_seconds, bounds.scrape_seconds):
        symptoms.append(
            f"Prometheus's scrapes of the harness took {measures.scrape_seconds:.2f}s on "
            f"average (bound {bounds.scrape_seconds:g}s)"
        )
    if _past(measures.service_cpu_wait_ratio, bounds.service_cpu_wait_ratio):
        symptoms.append(
            f"the service waited for a CPU {measures.service_cpu_wait_ratio:.0%} of its "
            f"runnable time (bound {bounds.service_cpu_wait_ratio:.0%})"
        )
    if _past(measures.cpu_pressure_percent, bounds.cpu_pressure_percent):
        busy.append(
            f"the machine's CPU pressure averaged {measures.cpu_pressure_percent:.0f}% "
            f"(bound {bounds.cpu_pressure_percent:.0f}%)"
        )
    return Starvation(
        tuple(symptoms), tuple(busy), _own(measures, bounds), measures.describe(bounds)
    )


def _own(measures: HarnessMeasures, bounds: StarvationBounds) -> str | None:
    """Why the service's own CPU use explains a starvation, or `None`."""
    limit, cores = measures.service_cpu_limit_cores, measures.service_cpu_cores
    named = "" if limit is None else f" ({limit:g} cores)"
    throttled = measures.service_throttled_ratio
    if throttled is not None and throttled >= bounds.service_throttled_ratio:
        return (
            f"its CPU limit{named} throttled it {throttled:.0%} of the window (from "
            f"{bounds.service_throttled_ratio:.0%} on the service's own CPU use is to blame)"
        )
    if limit and cores is not None and cores / limit >= bounds.service_cpu_usage_ratio:
        return (
            f"it used {cores / limit:.0%} of its CPU limit{named} (from "
            f"{bounds.service_cpu_usage_ratio:.0%} on its threads wait for each other)"
        )
    return None


def measure_starvation(config: GradingConfig, window: Window) -> HarnessMeasures | None:
    """The host's measures over the graded window (after the load grace); `None` when no
    sample read any of them (nothing to judge)."""
    graded = [s for s in window.samples if s.offset_seconds >= config.load_grace_seconds]
    live = [s for s in graded if not s.from_history]
    if not live:
        return None
    arrivals = _growth(live, lambda s: s.loadgen_arrivals)
    on_time = _growth(live, lambda s: s.loadgen_arrivals_on_time)
    intervals, late = _probe_lateness(config, live)
    wall = _growth(live, lambda s: s.offset_seconds if s.service_cpu_seconds is not None else None)
    run = _growth(live, lambda s: s.service_cpu_seconds)
    wait = _growth(live, lambda s: s.service_cpu_wait_seconds)
    throttled = _growth(live, lambda s: s.service_throttled_seconds)
    limits = [s.service_cpu_limit_cores for s in live if s.service_cpu_limit_cores is not None]
    measures = HarnessMeasures(
        start=live[0].offset_seconds,
        end=live[-1].offset_seconds,
        loadgen_arrivals=arrivals,
        loadgen_late_ratio=_share(arrivals - on_time, arrivals)
        if arrivals is not None and on_time is not None
        else None,
        probe_intervals=intervals,
        probe_late_ratio=_share(late, intervals),
        scrape_seconds=_mean(s.harness_scrape_seconds for s in live),
        cpu_pressure_percent=_mean(s.cpu_pressure_percent for s in live),
        service_cpu_wait_ratio=_share(wait, (run or 0.0) + (wait or 0.0))
        if wait is not None
        else None,
        service_throttled_ratio=_share(throttled, wall) if throttled is not None else None,
        service_cpu_cores=_share(run, wall) if run is not None else None,
        service_cpu_limit_cores=limits[-1] if limits else None,
    )
    read = (
        measures.loadgen_late_ratio,
        measures.scrape_seconds,
        measures.cpu_pressure_percent,
        measures.service_cpu_wait_ratio,
    )
    return measures if any(value is not None for value in read) else None


def _probe_lateness(config: GradingConfig, live: Sequence[GradingSample]) -> tuple[int, int]:
    """(intervals between consecutive live samples, those that started late)."""
    due = config.probe_interval_seconds + config.starvation.probe_lag_seconds
    gaps = [b.offset_seconds - a.offset_seconds for a, b in pairwise(live)]
    return len(gaps), sum(1 for gap in gaps if gap > due)


def _growth(
    samples: Sequence[GradingSample], read: Callable[[GradingSample], float | None]
) -> float | None:
    """A counter's growth over the samples that read it, summing only its rises: a drop is
    a reset (a process restarted) and the stretch across it is left out."""
    values = [value for sample in samples if (value := read(sample)) is not None]
    if len(values) < 2:
        return None
    return sum(max(0.0, b - a) for a, b in pairwise(values))


def _share(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return min(1.0, max(0.0, part / whole))


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def _past(value: float | None, bound: float) -> bool:
    return value is not None and value > bound
