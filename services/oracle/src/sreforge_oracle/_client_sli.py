"""`client_sli_held`: the SLI as the load generator's clients saw it, not as the app reports it.

The app's own latency histogram lives in the agent's workspace (SPEC §7.8: evidence,
not proof). The load generator is harness-owned and times every request it sends,
so its histogram is what the user-facing objective is judged on.
"""

from __future__ import annotations

from sreforge_oracle._model import GradingConfig, GradingSample
from sreforge_oracle._window import (
    Finding,
    Window,
    first_drop,
    gate,
    increase,
    lasting_shortfall,
    span,
)

__all__ = ["assess_client_sli"]

_ID = "client_sli_held"


def _count(sample: GradingSample) -> float | None:
    return sample.client_requests


def _within(sample: GradingSample) -> float | None:
    return sample.client_within_objective


def _unread(sample: GradingSample) -> bool:
    return sample.client_requests is None or sample.client_within_objective is None


def assess_client_sli(config: GradingConfig, window: Window) -> Finding | None:
    """Judge `client_sli_held` (a gate: weight 0); `None` when the scenario declares no objective.

    Over the sustained window (from the sample that starts the counted clear to the
    last one; when the alert never clears, the graded window after the load grace),
    the load requests completed within `client_latency_objective_seconds`, from the
    growth of the generator's histogram, must be at least
    `client_latency_objective_ratio` of all it completed. A histogram unread for
    `client_dip_tolerance_seconds` or longer (live samples only: history has no
    histogram), or a counter that went back (a reset),
    fails closed and is settled; a share short of the ratio is settled only once the
    window is complete, since later requests still count.
    """
    objective, ratio = (
        config.client_latency_objective_seconds,
        config.client_latency_objective_ratio,
    )
    if objective is None or ratio is None:
        return None
    if window.clear is not None:
        start, scope = window.clear.offset_seconds, "sustained window"
    elif window.complete:
        start, scope = config.load_grace_seconds, "graded window (the alert never cleared)"
    else:
        return gate(_ID, False, "the sustained window has not started yet", settled=False)
    # The generator's own /metrics has no history: a stretch read back from Prometheus
    # after an oracle restart is skipped, and the counters' growth spans it.
    # Nor has a sample whose read of the generator got no answer in time (`load_held`
    # reports that, blind): the counters' growth spans it too.
    held = [
        s
        for s in window.samples
        if s.offset_seconds >= start and not (s.from_history or s.load_unobserved)
    ]
    unread = lasting_shortfall(held, _unread, config.client_dip_tolerance_seconds)
    if unread:
        return gate(
            _ID,
            False,
            f"the load generator's latency histogram was not read {span(unread)}: it did not "
            f"answer, or loadgen_client_latency_seconds has no le={objective:g} bucket "
            "(the objective must be one of its bucket bounds)",
        )
    for label, read in (("request count", _count), (f"le={objective:g} bucket", _within)):
        drop = first_drop(held, read)
        if drop is not None:
            return gate(
                _ID,
                False,
                f"the load generator's latency histogram {label} went back from "
                f"{drop.was:.0f} to {drop.now:.0f} {drop.between()}: a reset (the load was "
                "restarted) leaves the window unmeasured",
            )
    total, within = increase(held, _count), increase(held, _within)
    if total is None or within is None or total <= 0:
        if not window.complete:
            return gate(_ID, False, f"no load request measured yet in the {scope}", settled=False)
        where = f"t={start:.1f}s to t={window.last_offset:.1f}s"
        return gate(_ID, False, f"no load request completed in the {scope} ({where})")
    share = within / total
    detail = (
        f"{within:.0f} of {total:.0f} load requests ({share:.2%}) answered within "
        f"{objective:g}s as the load generator timed them, "
        f"{span([s for s in held if not _unread(s)])} of the {scope}; need >= {ratio:.2%}"
    )
    if not window.complete:
        return gate(_ID, share >= ratio, f"{detail}; the window is not over", settled=False)
    return gate(_ID, share >= ratio, detail)
