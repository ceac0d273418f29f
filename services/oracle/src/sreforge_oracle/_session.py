"""One grading of one run: resume what was saved, sample to the end, fill what went unwatched.

Samples are saved to the run's journal as they are taken (every checkpoint), so a
restarted oracle resumes from them. Any stretch longer than the gap limit without a
live sample (the restart itself, a late start, a stalled probe) is read back from
Prometheus's history at the same cadence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import datetime

import structlog
from sreforge_contracts import RunState, ScenarioManifest

from sreforge_oracle._errors import GradingInterrupted, OracleError, ProbeError
from sreforge_oracle._grading import GapFiller, run_grading
from sreforge_oracle._history import history_samples
from sreforge_oracle._journal import RunJournal
from sreforge_oracle._model import (
    DeliveryOutcome,
    GradingConfig,
    GradingSample,
    MitigationGrade,
    ObservedAlert,
)
from sreforge_oracle._probe import PrometheusProbe
from sreforge_oracle._run_config import (
    PrometheusTiming,
    find_manifest,
    grading_config,
    handoff_union,
)
from sreforge_oracle._settings import OracleSettings

__all__ = ["GradingSession"]

_SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)


class GradingSession:
    """Grades one run; `halt` set mid-way saves the samples and raises `GradingInterrupted`."""

    def __init__(
        self,
        settings: OracleSettings,
        journal: RunJournal,
        halt: asyncio.Event,
        log: structlog.stdlib.BoundLogger,
    ) -> None:
        self._settings = settings
        self._journal = journal
        self._halt = halt
        self._log = log

    async def grade(self, url: str, state: RunState, started_at: datetime) -> MitigationGrade:
        """Grade the run against the Prometheus at `url`; the clock started at `started_at`.

        Raises `OracleError` (or `ContractError`) when no honest grade exists, and
        `GradingInterrupted` when halted.
        """
        settings, journal = self._settings, self._journal
        manifest = find_manifest(settings.use_cases_dir, state.scenario_id)
        if manifest.expected is None:
            raise OracleError(f"scenario {manifest.id} has no [expected] alert to grade")
        expected, telemetry = manifest.expected, manifest.verify.telemetry
        endpoints = {} if state.stack is None else state.stack.operator_endpoints
        loadgen = endpoints.get(settings.loadgen_endpoint)
        async with PrometheusProbe(
            url,
            alert_name=expected.alert,
            sli_promql=expected.p99_promql,
            load_target_promql=settings.load_target_promql,
            load_achieved_promql=settings.load_achieved_promql,
            loadgen_metrics_url=None if loadgen is None else f"{loadgen.rstrip('/')}/metrics",
            service_ok_promql=_service_promql(settings, manifest),
            client_objective_seconds=manifest.verify.client_latency_objective_seconds,
            app_requests_promql=None if telemetry is None else telemetry.app_requests_promql,
            load_requests_promql=None if telemetry is None else telemetry.load_requests_promql,
            read_monitoring=True,
            alertmanager_url=endpoints.get(settings.alertmanager_endpoint),
            timeout_seconds=settings.probe_timeout_seconds,
        ) as probe:
            config = grading_config(
                manifest,
                state.time_scale,
                await _timing(probe, expected.alert, settings.prometheus_wait_seconds),
                load_warmup_seconds=settings.load_warmup_seconds,
                fault_armed_at=state.armed_at,
            )
            probe.pace_monitoring(config.monitoring_dip_tolerance_seconds / 2)
            handoff = handoff_union(await journal.handoff() or (), state.handoff_alerts)
            self._log.info("oracle.grading", config=config.model_dump(mode="json"))
            prior = await journal.samples()
            if prior:
                self._log.info("oracle.resuming", saved=len(prior), last=str(prior[-1].at))
            return await self._sample(probe, config, handoff, started_at, prior)

    async def _sample(
        self,
        probe: PrometheusProbe,
        config: GradingConfig,
        handoff: Sequence[ObservedAlert],
        started_at: datetime,
        prior: list[GradingSample],
    ) -> MitigationGrade:
        """Run the sampling loop until graded, saving samples; a halt saves and hands back."""
        checkpoint = _Checkpoint(self._journal, self._settings.checkpoint_seconds)
        grading = asyncio.create_task(
            run_grading(
                probe,
                config,
                _SHIPPED,
                handoff,
                started_at=started_at,
                prior_samples=prior,
                on_sample=checkpoint.add,
                fill_gap=_from_history(probe, config, started_at),
            )
        )
        halted = asyncio.create_task(self._halt.wait())
        try:
            await asyncio.wait({grading, halted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            halted.cancel()
            if not grading.done():
                grading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await grading
            await checkpoint.flush()
        if grading.cancelled():
            raise GradingInterrupted("the oracle is stopping; grading resumes on redelivery")
        return grading.result()


def _service_promql(settings: OracleSettings, manifest: ScenarioManifest) -> str | None:
    """The ok-ratio query, only for a scenario that declares the `service_held` gate."""
    declared = manifest.verify.service_min_ok_ratio is not None
    return settings.service_ok_promql if declared else None


def _from_history(probe: PrometheusProbe, config: GradingConfig, started_at: datetime) -> GapFiller:
    """Fill an unwatched stretch (a restart, a stall) from Prometheus's TSDB, same cadence."""

    async def fill(start: datetime, end: datetime) -> list[GradingSample]:
        return await history_samples(
            probe,
            started_at=started_at,
            start=start,
            end=end,
            step_seconds=config.probe_interval_seconds,
        )

    return fill


class _Checkpoint:
    """Buffers new samples and saves them to the journal every `every` wall seconds."""

    def __init__(self, journal: RunJournal, every: float) -> None:
        self._journal = journal
        self._every = every
        self._pending: list[GradingSample] = []
        self._saved_at = time.monotonic()

    async def add(self, sample: GradingSample) -> None:
        self._pending.append(sample)
        if time.monotonic() - self._saved_at >= self._every:
            await self.flush()

    async def flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            await self._journal.append(batch)
        self._saved_at = time.monotonic()


async def _timing(probe: PrometheusProbe, alert: str, wait_seconds: float) -> PrometheusTiming:
    """The run's eval and scrape intervals and the alert's `for`, read from its Prometheus
    (already time-scaled).

    Retried for `wait_seconds`. A target alert that is not a loaded rule is an
    error: it would read "inactive" forever and pass any fix.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            evaluation, hold = await probe.rule_timing(alert)
            scrape = await probe.scrape_interval()
        except ProbeError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)
        else:
            scrape = scrape if scrape is not None else evaluation
            return PrometheusTiming(evaluation, scrape, alert_for_seconds=hold)
