"""The grading loop: sample every probe interval until the algorithm says grading is complete."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

import structlog
from sreforge_contracts import utcnow

from sreforge_oracle._errors import GradingError, ProbeError
from sreforge_oracle._mitigation import grade, grading_complete
from sreforge_oracle._model import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    ObservedAlert,
)

__all__ = ["GapFiller", "SampleSource", "probe_interval_for", "run_grading"]

_log = structlog.get_logger("sreforge.oracle")


class SampleSource(Protocol):
    """Anything that can take one grading sample (`PrometheusProbe` in production)."""

    async def sample(self, *, at: datetime, offset_seconds: float) -> GradingSample:
        """Probe now; `offset_seconds` counts from `Deployed`."""
        ...


GapFiller = Callable[[datetime, datetime], Awaitable[Sequence[GradingSample]]]
"""Samples for a stretch (start, end) the loop did not observe live, e.g. from history."""


def probe_interval_for(time_scale: float, eval_interval_seconds: float) -> float:
    """The probe interval: 1 s at time scale 1, scaled, never coarser than the eval interval."""
    if not 0 < time_scale <= 1:
        raise ValueError(f"time_scale must be in (0, 1], got {time_scale}")
    if eval_interval_seconds <= 0:
        raise ValueError(f"eval_interval_seconds must be > 0, got {eval_interval_seconds}")
    return min(1.0 * time_scale, eval_interval_seconds)


async def run_grading(
    source: SampleSource,
    config: GradingConfig,
    outcome: DeliveryOutcome,
    handoff_alerts: Iterable[ObservedAlert],
    *,
    started_at: datetime,
    now: Callable[[], datetime] = utcnow,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    prior_samples: Sequence[GradingSample] = (),
    on_sample: Callable[[GradingSample], Awaitable[None]] | None = None,
    give_up_after_seconds: float | None = None,
    fill_gap: GapFiller | None = None,
) -> MitigationGrade:
    """Grade a run: fail closed without probing, else sample until grading is complete.

    `started_at` is the `Deployed` time; `prior_samples` resumes a grading
    interrupted by a restart (a hole in the samples fails closed, see the
    README) unless `fill_gap` fills it: before a sample that follows the
    previous one (or `started_at`) by more than the gap limit, the stretch in
    between is asked of `fill_gap`. `on_sample` sees every new sample, filled
    ones included (to persist it or show progress). A probe failure leaves a
    hole in the samples; failures lasting longer than `give_up_after_seconds`
    (default 10 x the sample gap limit) raise `GradingError`: grading could not
    observe the run.
    """
    handoff = tuple(handoff_alerts)
    if not (outcome.submitted and outcome.ci_green and outcome.redeployed):
        return grade(config, outcome, handoff, ())
    budget = give_up_after_seconds or 10 * config.sample_gap_limit
    samples = list(prior_samples)
    while not (samples and grading_complete(config, handoff, samples)):
        at = now()
        # A Deployed stamped by a host whose clock runs ahead must not give negative offsets.
        offset = max(0.0, (at - started_at).total_seconds())
        try:
            sample = await source.sample(at=at, offset_seconds=offset)
        except ProbeError as error:
            _give_up_if_blind(samples, offset, budget, error)
        else:
            filled = await _fill(fill_gap, config, started_at, samples, sample)
            for new in (*filled, sample):
                samples.append(new)
                if on_sample is not None:
                    await on_sample(new)
        elapsed = (now() - started_at).total_seconds()
        await sleep(max(0.0, offset + config.probe_interval_seconds - elapsed))
    return grade(config, outcome, handoff, samples)


async def _fill(
    fill_gap: GapFiller | None,
    config: GradingConfig,
    started_at: datetime,
    samples: Sequence[GradingSample],
    sample: GradingSample,
) -> Sequence[GradingSample]:
    """The samples `fill_gap` gives for the hole before `sample`; none if no hole or it fails."""
    previous = samples[-1].offset_seconds if samples else 0.0
    if fill_gap is None or sample.offset_seconds - previous <= config.sample_gap_limit:
        return ()
    step = timedelta(seconds=config.probe_interval_seconds)
    start = samples[-1].at + step if samples else started_at
    end = sample.at - step / 2
    try:
        filled = await fill_gap(start, end)
    except ProbeError as error:
        _log.warning("oracle.gap_not_filled", start=str(start), end=str(end), error=str(error))
        return ()
    _log.info("oracle.gap_filled", start=str(start), end=str(end), samples=len(filled))
    floor = samples[-1].at if samples else None
    return [s for s in filled if (floor is None or s.at > floor) and s.at < sample.at]


def _give_up_if_blind(
    samples: Sequence[GradingSample], offset: float, budget: float, error: ProbeError
) -> None:
    last = samples[-1].offset_seconds if samples else 0.0
    _log.warning("oracle.probe_failed", offset_seconds=round(offset, 3), error=str(error))
    if offset - last > budget:
        raise GradingError(
            f"no sample for {offset - last:.1f}s (limit {budget:.1f}s) at t={offset:.1f}s; "
            f"last probe error: {error}"
        ) from error
