"""The oracle on the bus: fail-closed verdicts, the hand-off snapshot, and grading after Deployed.

Each run gets exactly one outcome (Scored, or RunFailed{stage=oracle} when no honest
verdict exists), claimed in KV before it is published. Grading survives a restart:
samples are saved as they are taken and a redelivered Deployed resumes from them,
the stretch the oracle missed being read back from Prometheus's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog
from sreforge_bus import Bus, ConsumerSpec, Context, Emit, Handled, Route, Service
from sreforge_contracts import (
    BriefReady,
    CiResult,
    ContractError,
    Deployed,
    Event,
    RunFailed,
    RunState,
    ScenarioManifest,
    Scored,
    Submitted,
)

from sreforge_oracle._errors import GradingInterrupted, OracleError
from sreforge_oracle._journal import RunJournal
from sreforge_oracle._model import DeliveryOutcome
from sreforge_oracle._patch import patch_not_submitted, patch_scored
from sreforge_oracle._probe import PrometheusProbe
from sreforge_oracle._run_config import fail_closed_scored, find_manifest, oracle_failed, scored
from sreforge_oracle._session import GradingSession
from sreforge_oracle._settings import OracleSettings

__all__ = [
    "BRIEF_CONSUMER",
    "CI_CONSUMER",
    "DEPLOYED_CONSUMER",
    "SERVICE",
    "SUBMITTED_CONSUMER",
    "Oracle",
    "OracleService",
    "oracle_service",
]

Log = structlog.stdlib.BoundLogger

SUBMITTED_CONSUMER = ConsumerSpec("oracle-submitted", ("sreforge.run.*.Submitted",))
CI_CONSUMER = ConsumerSpec("oracle-ci", ("sreforge.run.*.CiResult",))
BRIEF_CONSUMER = ConsumerSpec("oracle-brief", ("sreforge.run.*.BriefReady",))
DEPLOYED_CONSUMER = ConsumerSpec("oracle-deployed", ("sreforge.run.*.Deployed",), max_deliver=10)
"""Grading holds its Deployed for minutes (kept alive by in-progress acks); after a crash
it comes back within the default ack wait (5 s), and a stop hands it back at once. Every
hand-back counts as a delivery (a stalled loop's redelivery to the grading worker is
absorbed, not graded twice), hence the larger budget."""


class Oracle:
    """The oracle's handlers; settings are read from the environment on first use."""

    def __init__(self, settings: OracleSettings | None = None) -> None:
        self._settings = settings
        self._halt = asyncio.Event()

    @property
    def settings(self) -> OracleSettings:
        """The settings in force (`SREFORGE_ORACLE_*`)."""
        if self._settings is None:
            self._settings = OracleSettings()
        return self._settings

    async def open(self, bus: Bus) -> None:
        """The start hook: a fresh halt signal for this serving of the service."""
        self._halt = asyncio.Event()

    async def halt_on_stop(self, bus: Bus, stopping: asyncio.Event) -> None:
        """The service's task: halt grading as soon as the service stops, so an in-flight
        Deployed is saved and handed back instead of holding the stop up for minutes."""
        halt = self._halt
        await stopping.wait()
        halt.set()

    async def on_submitted(self, event: Submitted, context: Context) -> Handled:
        """No submission → failed (`no_submission`); a submission waits for CI."""
        if event.submission.submitted:
            return ()
        why = event.submission.stop_reason or ""
        manifest = await self._manifest_for(event.run_id, context)
        if manifest is not None and manifest.profile == "patch":
            unsubmitted = patch_not_submitted(event.run_id, why, manifest.verify.weights)
            return await _once(RunJournal(context.runs, event.run_id), unsubmitted)
        outcome = DeliveryOutcome(submitted=False, ci_green=False, redeployed=False, reason=why)
        return await self._settle(event.run_id, outcome, context)

    async def on_ci_result(self, event: CiResult, context: Context) -> Handled:
        """CI red → rejected, score 0; green waits for Deployed, except a patch run's,
        which is scored at once from its graded test sets (`_patch.py`)."""
        manifest = await self._manifest_for(event.run_id, context)
        if manifest is not None and manifest.profile == "patch":
            scored_now = patch_scored(event, manifest.verify.weights)
            return await _once(RunJournal(context.runs, event.run_id), scored_now)
        if event.green:
            return ()
        outcome = DeliveryOutcome(submitted=True, ci_green=False, redeployed=False)
        return await self._settle(event.run_id, outcome, context)

    async def on_brief(self, event: BriefReady, context: Context) -> Sequence[Event]:
        """Snapshot the alerts firing at hand-off from the run's Prometheus (once per run).

        One attempt: a snapshot taken later would wrongly excuse alerts the agent
        caused, so a failed one is skipped (the correlator's hand-off list remains).
        """
        state = await _readable_run_state(context, event.run_id)
        url = self._prometheus_url(state)
        if url is None:
            context.log.warning("oracle.handoff_skipped", run_id=event.run_id, reason="no stack")
            return ()
        async with PrometheusProbe(url, alert_name="-", sli_promql="vector(0)") as probe:
            try:
                alerts = await probe.alerts()
            except OracleError as error:
                context.log.warning("oracle.handoff_skipped", run_id=event.run_id, error=str(error))
                return ()
        firing = [alert for alert in alerts if alert.state == "firing"]
        await RunJournal(context.runs, event.run_id).save_handoff(firing)
        return ()

    async def on_deployed(self, event: Deployed, context: Context) -> Handled:
        """Grade the deployed fix (or fail closed on a failed redeploy) and publish one outcome."""
        journal = RunJournal(context.runs, event.run_id)
        existing = await journal.outcome()
        if existing is not None:
            return await _once(journal, existing.event)
        result: Scored | RunFailed
        if not event.redeployed:
            outcome = DeliveryOutcome(
                submitted=True, ci_green=True, redeployed=False, reason=event.error or ""
            )
            weights = await self._weights_for(event.run_id, context)
            result = fail_closed_scored(event.run_id, outcome, weights)
        else:
            result = await self._grade(event, journal, context.bus, context.log)
        return await _once(journal, result)

    async def _settle(self, run_id: str, outcome: DeliveryOutcome, context: Context) -> Handled:
        weights = await self._weights_for(run_id, context)
        journal = RunJournal(context.runs, run_id)
        return await _once(journal, fail_closed_scored(run_id, outcome, weights))

    async def _manifest_for(self, run_id: str, context: Context) -> ScenarioManifest | None:
        """The run's scenario manifest; None (logged) when the run or scenario is unknown."""
        state = await _readable_run_state(context, run_id)
        if state is None:
            return None
        try:
            return find_manifest(self.settings.use_cases_dir, state.scenario_id)
        except (OracleError, ContractError) as error:
            context.log.warning("oracle.manifest_unknown", run_id=run_id, reason=str(error))
            return None

    async def _weights_for(self, run_id: str, context: Context) -> dict[str, float] | None:
        """The manifest's weights for the record's detail; defaults if the run is unknown."""
        state = await _readable_run_state(context, run_id)
        if state is None:
            return None
        try:
            manifest = find_manifest(self.settings.use_cases_dir, state.scenario_id)
            return dict(manifest.verify.weights)
        except (OracleError, ContractError) as error:
            context.log.warning("oracle.default_weights", run_id=run_id, reason=str(error))
            return None

    def _prometheus_url(self, state: RunState | None) -> str | None:
        if state is None or state.stack is None:
            return None
        return state.stack.operator_endpoints.get(self.settings.prometheus_endpoint)

    async def _grade(
        self, event: Deployed, journal: RunJournal, bus: Bus, log: Log
    ) -> Scored | RunFailed:
        run_id = event.run_id
        try:
            state = await bus.runs.run_state(run_id)
        except ValueError as error:
            return oracle_failed(run_id, f"the run state of {run_id} in KV is unreadable: {error}")
        if state is None:
            return oracle_failed(run_id, f"no run state for {run_id} in KV: no stack to grade")
        url = self._prometheus_url(state)
        if url is None:
            key = self.settings.prometheus_endpoint
            return oracle_failed(run_id, f"the run's stack reports no {key!r} operator endpoint")
        try:
            session = GradingSession(self.settings, journal, self._halt, log)
            return scored(run_id, await session.grade(url, state, event.occurred_at))
        except GradingInterrupted:
            raise
        except (OracleError, ContractError, ValueError) as error:
            log.error("oracle.grading_failed", run_id=run_id, error=str(error))
            return oracle_failed(run_id, f"grading against {url} failed: {error}")


async def _readable_run_state(context: Context, run_id: str) -> RunState | None:
    """The run state, or `None` (logged) when it is missing or unreadable."""
    try:
        return await context.run_state(run_id)
    except ValueError as error:
        context.log.warning("oracle.run_state_unreadable", run_id=run_id, error=str(error))
        return None


async def _once(journal: RunJournal, event: Scored | RunFailed) -> Handled:
    """Claim `event` as the run's outcome (or adopt the one claimed), to be published once:
    marked published only after it is stored, so a redelivery publishes nothing more."""
    outcome = await journal.claim_outcome(event)
    if outcome.published:
        return ()

    async def published() -> Sequence[Event]:
        await journal.mark_published(outcome)
        return ()

    return Emit(events=[outcome.event], then=published)


@dataclass(frozen=True)
class OracleService(Service):
    """The oracle's routes; stopping it interrupts grading so the input can resume elsewhere."""

    oracle: Oracle = field(default_factory=Oracle)


def oracle_service(
    settings: OracleSettings | None = None, *, deployed: ConsumerSpec = DEPLOYED_CONSUMER
) -> OracleService:
    """The oracle service; `deployed` lets tests shorten the crash-redelivery `ack_wait`."""
    oracle = Oracle(settings)
    return OracleService(
        name="oracle",
        oracle=oracle,
        routes=(
            Route.on(SUBMITTED_CONSUMER, Submitted, oracle.on_submitted),
            Route.on(CI_CONSUMER, CiResult, oracle.on_ci_result),
            Route.on(BRIEF_CONSUMER, BriefReady, oracle.on_brief),
            Route.on(deployed, Deployed, oracle.on_deployed),
        ),
        tasks=(oracle.halt_on_stop,),
        on_start=(oracle.open,),
    )


SERVICE = oracle_service()
"""The oracle as the engine runs it (`await SERVICE.run(bus, stop_event)`)."""
