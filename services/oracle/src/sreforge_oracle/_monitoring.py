"""`monitoring_intact`: the Prometheus and Alertmanager that grade the run stayed the same.

A restarted Prometheus forgets the pending state and the history its rules judge; a
reloaded one may run other rules or scrape other targets; a restarted Alertmanager
forgets what it was told. Each is read at every live sample and compared with the
first reading of grading.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sreforge_oracle._model import GradingConfig, MonitoringSnapshot
from sreforge_oracle._window import Finding, Window, gate, lasting_shortfall, span

__all__ = ["assess_monitoring"]

_ID = "monitoring_intact"


def assess_monitoring(config: GradingConfig, window: Window) -> Finding | None:
    """Judge `monitoring_intact` (a gate: weight 0); `None` unless `monitoring_gated`.

    Fails, settled, when Prometheus or Alertmanager started at or after
    `fault_armed_at` (or that time is unknown), when either restarted (start time
    changed), when Prometheus reloaded its configuration or a reload failed, when the
    rules, the scrape targets (a job gone, a URL changed) or Alertmanager's
    configuration differ from the first reading, or when Alertmanager did not answer
    for `monitoring_dip_tolerance_seconds` or longer. Samples without a reading
    (read back from history after an oracle restart) are not evidence either way:
    a restart or reload in between shows in the next reading's start or load time.
    """
    if not config.monitoring_gated:
        return None
    seen = [(s, s.monitoring) for s in window.samples if s.monitoring is not None]
    if not seen:
        if window.complete:
            return gate(_ID, False, "the monitoring plane was never read during grading")
        return gate(_ID, False, "the monitoring plane not read yet", settled=False)
    base = seen[0][1]
    answered = [snapshot for _, snapshot in seen if snapshot.alertmanager_started_at is not None]
    am_base = answered[0] if answered else None
    wrong = _started_late(config.fault_armed_at, base, am_base) or _jobs_missing(config, base)
    if wrong is not None:
        return gate(_ID, False, wrong)
    for sample, snapshot in seen:
        changed = _changed(base, snapshot) or _am_changed(am_base, snapshot)
        if changed is not None:
            return gate(_ID, False, f"{changed} (seen at t={sample.offset_seconds:.1f}s)")
    samples = [sample for sample, _ in seen]
    silent = lasting_shortfall(
        samples,
        lambda s: s.monitoring is None or s.monitoring.alertmanager_started_at is None,
        config.monitoring_dip_tolerance_seconds,
    )
    if silent:
        return gate(_ID, False, f"Alertmanager did not answer {span(silent)}")
    if am_base is None:
        if window.complete:
            return gate(_ID, False, "Alertmanager never answered during grading")
        return gate(_ID, False, "Alertmanager not read yet", settled=False)
    return gate(
        _ID,
        True,
        f"Prometheus up since {_at(base.prometheus_started_at)} and Alertmanager since "
        f"{_at(am_base.alertmanager_started_at)}, before the fault was armed at "
        f"{_at(config.fault_armed_at)}; rules, scrape targets (jobs {', '.join(base.jobs)}) "
        f"and Alertmanager's configuration unchanged {span(samples)}",
    )


def _started_late(
    armed: datetime | None, base: MonitoringSnapshot, am_base: MonitoringSnapshot | None
) -> str | None:
    if armed is None:
        return "the fault's armed time is unknown: cannot tell the monitoring plane predates it"
    if not base.prometheus_reload_ok:
        return "Prometheus's last configuration reload had failed when grading began"
    if not base.jobs:
        return "Prometheus had no scrape target when grading began"
    if base.prometheus_started_at >= armed:
        return (
            f"Prometheus started at {_at(base.prometheus_started_at)}, not before the fault "
            f"was armed at {_at(armed)}: it was restarted during the run"
        )
    loaded = base.prometheus_config_loaded_at
    if loaded is not None and loaded >= armed:
        return (
            f"Prometheus reloaded its configuration at {_at(loaded)}, after the fault was "
            f"armed at {_at(armed)}"
        )
    am = None if am_base is None else am_base.alertmanager_started_at
    if am is not None and am >= armed:
        return (
            f"Alertmanager started at {_at(am)}, not before the fault was armed at "
            f"{_at(armed)}: it was restarted during the run"
        )
    return None


def _jobs_missing(config: GradingConfig, base: MonitoringSnapshot) -> str | None:
    missing = sorted(config.monitoring_jobs - set(base.jobs))
    if not missing:
        return None
    return (
        f"job(s) {', '.join(missing)}, which the scenario's queries read, not among "
        f"Prometheus's scrape targets (jobs {', '.join(base.jobs) or 'none'})"
    )


def _changed(base: MonitoringSnapshot, now: MonitoringSnapshot) -> str | None:
    """What differs from the first reading, named; `None` when nothing that matters does."""
    if now.prometheus_started_at != base.prometheus_started_at:
        return (
            f"Prometheus restarted: up since {_at(now.prometheus_started_at)}, "
            f"was since {_at(base.prometheus_started_at)}"
        )
    if now.prometheus_config_loaded_at != base.prometheus_config_loaded_at:
        return (
            f"Prometheus reloaded its configuration at {_at(now.prometheus_config_loaded_at)} "
            f"(loaded at {_at(base.prometheus_config_loaded_at)} when grading began)"
        )
    if not now.prometheus_reload_ok:
        return "a configuration reload of Prometheus failed"
    if now.rules != base.rules:
        return f"Prometheus's rules changed (fingerprint {base.rules} became {now.rules})"
    if now.targets != base.targets:
        return _targets_changed(base.jobs, now.jobs)
    return None


def _am_changed(base: MonitoringSnapshot | None, now: MonitoringSnapshot) -> str | None:
    """Alertmanager restarted or reconfigured since its first answer; silence is judged apart."""
    am, first_am = (
        now.alertmanager_started_at,
        None if base is None else base.alertmanager_started_at,
    )
    if am is None or first_am is None or base is None:
        return None
    if am != first_am:
        return f"Alertmanager restarted: up since {_at(am)}, was since {_at(first_am)}"
    if now.alertmanager_config != base.alertmanager_config:
        return (
            f"Alertmanager's configuration changed (fingerprint {base.alertmanager_config} "
            f"became {now.alertmanager_config})"
        )
    return None


def _targets_changed(before: Sequence[str], after: Sequence[str]) -> str:
    gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    if gone:
        return f"scrape target job(s) {', '.join(gone)} went missing from Prometheus"
    if new:
        return f"scrape target job(s) {', '.join(new)} appeared in Prometheus"
    return f"the scrape URLs of Prometheus's targets changed (jobs {', '.join(after)})"


def _at(moment: datetime | None) -> str:
    return "an unknown time" if moment is None else moment.isoformat(timespec="milliseconds")
