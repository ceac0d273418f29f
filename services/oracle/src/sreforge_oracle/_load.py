"""`load_held`: grading without load proves nothing, so a run without it cannot pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from sreforge_oracle._model import GradingConfig, GradingSample
from sreforge_oracle._window import Finding, Window, first_gap, first_lasting_run, gate

__all__ = ["assess_load"]

_ID = "load_held"

_Shortfall = Literal["died", "app_down", "throttled"]

_CAUSES: dict[_Shortfall, str] = {
    "died": "the load died (no load-generator data)",
    "app_down": "the app stopped answering (no SLI value while the load fell short)",
    "throttled": "the load was throttled (achieved rate low while the app answered)",
}
# When causes tie, name the one that explains the others: no generator beats no app.
_PRECEDENCE: tuple[_Shortfall, ...] = ("died", "app_down", "throttled")


def assess_load(config: GradingConfig, window: Window) -> Finding:
    """Judge `load_held` over the window after `load_grace_seconds` (a gate: weight 0).

    Every sample from the grace period on must show the achieved rate at or
    above `load_min_ratio` x target. A shortfall lasting `load_dip_tolerance_seconds`
    or longer (measured first to last short sample; 0 means any short sample)
    fails it, and so does a gap in the samples or a complete window without a
    single load sample. Samples whose read of the generator got no answer in time
    (`load_unobserved`) are neither short nor held: a run of them lasting the
    tolerance leaves the gate unsatisfied but `blind` (the harness could not see the
    load), never settled, and the run's verdict is then the grading's to decide.
    """
    graded = [s for s in window.samples if s.offset_seconds >= config.load_grace_seconds]
    seen = [s for s in graded if not s.load_unobserved]
    gap = first_gap(graded, config.load_grace_seconds, config.sample_gap_limit)
    shortfall = _first_shortfall(config, seen)
    if shortfall:
        return gate(_ID, False, _shortfall_detail(config, shortfall))
    unobserved = first_lasting_run(
        graded, lambda s: s.load_unobserved, config.load_dip_tolerance_seconds
    )
    if gap is None and (unobserved or (graded and not seen)):
        run = unobserved or graded
        return gate(_ID, False, _unobserved_detail(config, graded, run), blind=True)
    unread, graded = len(graded) - len(seen), seen
    if gap is not None:
        return gate(
            _ID,
            False,
            f"load not observed from t={gap[0]:.1f}s to t={gap[1]:.1f}s "
            f"(limit {config.sample_gap_limit:.1f}s without a sample)",
        )
    if not graded:
        if window.complete:
            return gate(
                _ID,
                False,
                f"no sample after the {config.load_grace_seconds:.1f}s load grace period",
            )
        return gate(_ID, False, "load not observed yet", settled=False)
    lowest = min(_ratio(sample) for sample in graded)
    detail = (
        f"achieved >= {config.load_min_ratio:.0%} of target at {len(graded)} samples "
        f"from t={graded[0].offset_seconds:.1f}s to t={graded[-1].offset_seconds:.1f}s "
        f"(lowest {lowest:.0%})"
    )
    if unread:
        detail += f"; {unread} samples unread (the generator slow to answer), none for long"
    return gate(_ID, True, detail)


def _first_shortfall(
    config: GradingConfig, graded: Sequence[GradingSample]
) -> list[tuple[GradingSample, _Shortfall]]:
    """The first run of short samples lasting the tolerance or longer, else `[]`."""
    run = first_lasting_run(
        graded,
        lambda sample: _shortfall_of(config, sample) is not None,
        config.load_dip_tolerance_seconds,
    )
    return [(sample, cause) for sample in run if (cause := _shortfall_of(config, sample))]


def _shortfall_of(config: GradingConfig, sample: GradingSample) -> _Shortfall | None:
    achieved, target = sample.load_achieved_rps, sample.load_target_rps
    if achieved is None or target is None:
        return "died"
    if target > 0 and achieved >= config.load_min_ratio * target:
        return None
    # A target of 0 means the generator runs but offers nothing: throttled.
    return "app_down" if sample.sli is None and target > 0 else "throttled"


def _ratio(sample: GradingSample) -> float:
    achieved, target = sample.load_achieved_rps or 0.0, sample.load_target_rps or 0.0
    return achieved / target if target > 0 else 0.0


def _shortfall_detail(
    config: GradingConfig, run: Sequence[tuple[GradingSample, _Shortfall]]
) -> str:
    counts = Counter(cause for _, cause in run)
    cause = max(_PRECEDENCE, key=lambda c: (counts[c], -_PRECEDENCE.index(c)))
    first = run[0][0]
    tally = ", ".join(f"{counts[c]} {c.replace('_', ' ')}" for c in _PRECEDENCE if counts[c])
    rates = f"achieved {_rate(first.load_achieved_rps)} of target {_rate(first.load_target_rps)}"
    return (
        f"load not held from t={first.offset_seconds:.1f}s: {_CAUSES[cause]}; "
        f"first short sample {rates} (need >= {config.load_min_ratio:.0%}); "
        f"short samples: {tally}"
    )


def _unobserved_detail(
    config: GradingConfig, graded: Sequence[GradingSample], run: Sequence[GradingSample]
) -> str:
    """Where the generator went unread; the whole stretch, and every unread sample."""
    start = next(i for i, sample in enumerate(graded) if sample is run[0])
    stretch = []
    for sample in graded[start:]:
        if not sample.load_unobserved:
            break
        stretch.append(sample)
    total = sum(1 for sample in graded if sample.load_unobserved)
    return (
        f"load not observed from t={stretch[0].offset_seconds:.1f}s to "
        f"t={stretch[-1].offset_seconds:.1f}s: the load generator's /metrics did not answer "
        f"in time at {len(stretch)} samples in a row (its port open; {total} such samples "
        f"in all, tolerance {config.load_dip_tolerance_seconds:.1f}s): the harness could "
        "not see the load, which is no evidence that it died"
    )


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f} rps"
