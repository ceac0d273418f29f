"""`telemetry_intact`: the app's own telemetry kept reporting the traffic it was graded on.

The alert and the SLI come from the app's metrics, which the agent can change: leaving
the graded endpoint unobserved reads as "no value", never as a healthy SLI, and an app
that counts fewer requests than the load generator sent is not reporting all of them.
"""

from __future__ import annotations

from sreforge_oracle._model import GradingConfig, GradingSample
from sreforge_oracle._window import Finding, Window, first_drop, gate, lasting_shortfall, span

__all__ = ["assess_telemetry"]

_ID = "telemetry_intact"


def _app(sample: GradingSample) -> float | None:
    return sample.app_requests


def _load(sample: GradingSample) -> float | None:
    return sample.load_requests


def _app_unread(sample: GradingSample) -> bool:
    return sample.app_requests is None


def _load_unread(sample: GradingSample) -> bool:
    return sample.load_requests is None


def assess_telemetry(config: GradingConfig, window: Window) -> Finding | None:
    """Judge `telemetry_intact` (a gate: weight 0); `None` unless `telemetry_gated`.

    After `load_grace_seconds`, the SLI must have a value at every sample (a run of
    samples without one lasting `telemetry_dip_tolerance_seconds` fails). With
    `telemetry_count_tolerance`, the app's request count and the load generator's must
    be read likewise, neither may go back (the app's going back is a restart: a crash
    under grading), and over the window their growths must agree within the tolerance
    (a share of the load's growth). The agreement is settled once the window is complete.
    """
    if not config.telemetry_gated:
        return None
    grace, tolerance = config.load_grace_seconds, config.telemetry_count_tolerance
    graded = [s for s in window.samples if s.offset_seconds >= grace]
    blind = lasting_shortfall(
        graded, lambda s: s.sli is None, config.telemetry_dip_tolerance_seconds
    )
    if blind:
        return gate(
            _ID,
            False,
            f"the SLI had no value {span(blind)} while the load ran: the app's telemetry did "
            "not report the graded traffic (a missing SLI is never a healthy one)",
        )
    if tolerance is not None:
        failed = _counts_broken(config, graded)
        if failed is not None:
            return failed
    if not graded:
        if window.complete:
            return gate(_ID, False, f"no sample after the {grace:.1f}s load grace period")
        return gate(_ID, False, "telemetry not observed yet", settled=False)
    present = f"the SLI had a value at every sample {span(graded)}"
    if tolerance is None:
        return gate(_ID, True, present)
    counted = [s for s in graded if s.app_requests is not None and s.load_requests is not None]
    if len(counted) < 2:
        if window.complete:
            return gate(_ID, False, f"{present}, but the request counts were read under twice")
        return gate(_ID, False, "request counts not observed yet", settled=False)
    first, last = counted[0], counted[-1]
    app = (last.app_requests or 0.0) - (first.app_requests or 0.0)
    load = (last.load_requests or 0.0) - (first.load_requests or 0.0)
    counts = (
        f"the app counted {app:.0f} requests for the graded endpoints and the load generator "
        f"{load:.0f} {span(counted)}"
    )
    if load <= 0:
        if window.complete:
            return gate(_ID, False, f"{counts}: no load request to compare with")
        return gate(_ID, False, f"{counts}; no load request counted yet", settled=False)
    off = abs(app - load) / load
    agree = off <= tolerance
    verdict = "agree" if agree else "disagree"
    detail = f"{counts}: they {verdict} ({off:.1%} apart, tolerance {tolerance:.0%}); {present}"
    if not window.complete:
        return gate(_ID, agree, f"{detail}; the window is not over", settled=False)
    return gate(_ID, agree, detail)


def _counts_broken(config: GradingConfig, graded: list[GradingSample]) -> Finding | None:
    """A count unread for the tolerance, or a count that went back; `None` when neither."""
    tolerance = config.telemetry_dip_tolerance_seconds
    for whose, unread_at in (("the app's", _app_unread), ("the load generator's", _load_unread)):
        unread = lasting_shortfall(graded, unread_at, tolerance)
        if unread:
            return gate(
                _ID, False, f"{whose} request count (Prometheus) had no value {span(unread)}"
            )
    drop = first_drop(graded, _app)
    if drop is not None:
        return gate(
            _ID,
            False,
            f"the app's request count went back from {drop.was:.0f} to {drop.now:.0f} "
            f"{drop.between()}: the app restarted (a crash) or its counter was reset",
        )
    drop = first_drop(graded, _load)
    if drop is not None:
        return gate(
            _ID,
            False,
            f"the load generator's request count went back from {drop.was:.0f} to "
            f"{drop.now:.0f} {drop.between()}: the load was restarted",
        )
    return None
