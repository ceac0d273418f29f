"""`service_held`: a fix that makes the service fast by making it do less is not a mitigation.

The load generator (harness-side, out of the agent's reach) checks every answer it
gets against its profile: `ok` (a complete answer), `degraded` (a 2xx short of it,
e.g. search hits without their metadata), `wrong` (a 2xx that disagrees with the truth:
made-up hits, stale counts) or `failed` (an error or a timeout). It
exports the share of ok answers over its sliding window as `loadgen_ok_ratio`; this
gate holds that share at or above the scenario's `service_min_ok_ratio`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sreforge_oracle._model import GradingConfig, GradingSample
from sreforge_oracle._window import Finding, Window, first_gap, gate, lasting_shortfall

__all__ = ["assess_service"]

_ID = "service_held"


def assess_service(config: GradingConfig, window: Window) -> Finding | None:
    """Judge `service_held` (a gate: weight 0), or `None` when the scenario declares none.

    From `load_grace_seconds` on, every sample must show the load generator's ok
    ratio at or above `service_min_ok_ratio`; a sample without a ratio (no checked
    answer in the generator's window, the generator gone) counts as short; one whose
    read of the generator got no answer in time (`load_unobserved`) is skipped. A short
    run lasting `service_dip_tolerance_seconds` or longer (first to last short
    sample; 0 means any short sample) fails it, and so does a gap in the samples or
    a complete window without a sample after the grace.
    """
    minimum = config.service_min_ok_ratio
    if minimum is None:
        return None
    grace = config.load_grace_seconds
    timed = [s for s in window.samples if s.offset_seconds >= grace]
    # An unread generator is no answer-check data either way: `load_held` says so, blind.
    graded = [s for s in timed if not s.load_unobserved]
    short = lasting_shortfall(
        graded, lambda s: _is_short(minimum, s), config.service_dip_tolerance_seconds
    )
    if short:
        return gate(_ID, False, _short_detail(minimum, short))
    gap = first_gap(timed, grace, config.sample_gap_limit)
    if gap is not None:
        return gate(
            _ID,
            False,
            f"answers not observed from t={gap[0]:.1f}s to t={gap[1]:.1f}s "
            f"(limit {config.sample_gap_limit:.1f}s without a sample)",
        )
    if not graded:
        if timed:
            return gate(_ID, False, "answers not observed: the load generator was unread "
                        "at every sample", blind=True)  # fmt: skip
        if window.complete:
            return gate(_ID, False, f"no sample after the {grace:.1f}s load grace period")
        return gate(_ID, False, "answers not observed yet", settled=False)
    lowest = min(s.service_ok_ratio or 0.0 for s in graded)
    return gate(
        _ID,
        True,
        f"ok answers >= {minimum:.0%} of those checked at {len(graded)} samples "
        f"from t={graded[0].offset_seconds:.1f}s to t={graded[-1].offset_seconds:.1f}s "
        f"(lowest {lowest:.0%})",
    )


def _is_short(minimum: float, sample: GradingSample) -> bool:
    ratio = sample.service_ok_ratio
    return ratio is None or ratio < minimum


def _short_detail(minimum: float, run: Sequence[GradingSample]) -> str:
    first, last = run[0], run[-1]
    ratios = [s.service_ok_ratio for s in run if s.service_ok_ratio is not None]
    blind = len(run) - len(ratios)
    when = (
        f"at t={first.offset_seconds:.1f}s"
        if len(run) == 1
        else f"from t={first.offset_seconds:.1f}s to t={last.offset_seconds:.1f}s"
    )
    if not ratios:
        return (
            f"service not held {when}: no answer-check data at {blind} samples (the load "
            "generator reported no ok ratio: no checked answer in its window, or it is gone)"
        )
    low, high = _share(min(ratios), minimum), _share(max(ratios), minimum)
    share = low if low == high else f"{low} to {high}"
    tally = f"; {blind} samples without check data" if blind else ""
    return (
        f"service not held {when}: only {share} of the load's checked answers were ok "
        f"(need >= {minimum:.0%}); the rest were degraded (a 2xx short of a complete "
        f"answer), wrong (a 2xx that disagrees with the truth) or failed (error or "
        f"timeout){tally}"
    )


def _share(ratio: float, minimum: float) -> str:
    """`ratio` as a percentage, to a tenth where whole ones would read as the minimum."""
    whole = f"{ratio:.0%}"
    return f"{ratio:.1%}" if whole == f"{minimum:.0%}" else whole
