"""Every event of the run lifecycle: the envelope plus a typed body (SPEC §3)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from sreforge_contracts._contract import RunContract, RunWorkspace
from sreforge_contracts._envelope import Event
from sreforge_contracts._ids import RunId, ScenarioId, TopologyName
from sreforge_contracts._record import OracleScore, SliSample, Verdict
from sreforge_contracts._run_record import CiOutcome, CiTestSet, DeployOutcome
from sreforge_contracts._scenario_env import DeliveryMode
from sreforge_contracts._subjects import TRIGGER_FIRED_SUBJECT, TRIGGER_RESOLVED_SUBJECT
from sreforge_contracts._submission import Submission
from sreforge_contracts._trigger import Trigger

__all__ = [
    "BriefReady",
    "CiResult",
    "CleanedUp",
    "Deployed",
    "FaultArmed",
    "Recorded",
    "RunFailed",
    "RunRejected",
    "RunRequested",
    "RunTriggered",
    "Scored",
    "StackReady",
    "Submitted",
    "TriggerFired",
    "TriggerResolved",
]


class _RunEvent(Event):
    """A run-scoped event: `run_id` is required and names the subject."""

    run_id: RunId


class RunRequested(_RunEvent):
    """The correlator accepted `run.start` and created the run's state."""

    type: Literal["RunRequested"] = "RunRequested"
    scenario: ScenarioId
    agent: str = Field(min_length=1)
    time_scale: float = Field(default=1.0, gt=0, le=1)
    labels: dict[str, str] = Field(default_factory=dict)
    alert_route: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The opaque route this run's Alertmanager posts to; carries no harness words."""
    topology: TopologyName | None = None
    """Where the deployer runs the stack (`run.start`'s `topology`); None: where the
    scenario's stack declares (`topology` in its `stack.toml`), else `local`."""


class RunRejected(_RunEvent):
    """The correlator refused `run.start`; `reason` says why.

    The correlator mints a run id for the rejection when the request had none
    (or an invalid one), so every rejection has a subject and a record.
    """

    type: Literal["RunRejected"] = "RunRejected"
    reason: str = Field(min_length=1)
    scenario: str | None = None


class StackReady(_RunEvent):
    """The run's stack is up and healthy; its endpoints as the agent and operator see them."""

    type: Literal["StackReady"] = "StackReady"
    stack: str = Field(min_length=1)
    run_dir: str = Field(min_length=1)
    agent_endpoints: dict[str, str]
    operator_endpoints: dict[str, str]
    run_workspace: RunWorkspace | None = None
    topology: TopologyName | None = None
    """The topology the stack runs on (what the deployer resolved)."""
    agent_network: str | None = None
    """The Docker network an `in-box` agent session joins (compose only)."""
    network_endpoints: dict[str, str] = Field(default_factory=dict)
    """The agent's endpoints as seen from inside `agent_network` (`http://prometheus:9090`)."""


class FaultArmed(_RunEvent):
    """The fault is delivered and load is running: the confirm-fire window opens."""

    type: Literal["FaultArmed"] = "FaultArmed"
    armed_at: datetime
    delivery_mode: DeliveryMode
    fault_commit: str | None = None
    base_commit: str | None = None
    """The workspace commit the agent starts from; its submission is diffed against it."""
    load_target_rps: float | None = Field(default=None, gt=0)


class TriggerFired(Event):
    """An alert or feed signal fired, normalised; not yet tied to a run (run_id may be None)."""

    type: Literal["TriggerFired"] = "TriggerFired"
    trigger: Trigger

    def default_event_id(self) -> str:
        """A content hash: a re-sent notification of the same firing dedupes."""
        return f"trigger.fired.{self.trigger.content_hash()[:40]}"

    @property
    def subject(self) -> str:
        """`sreforge.trigger.fired`."""
        return TRIGGER_FIRED_SUBJECT


class TriggerResolved(Event):
    """An alert or feed signal resolved."""

    type: Literal["TriggerResolved"] = "TriggerResolved"
    trigger: Trigger

    def default_event_id(self) -> str:
        """A content hash of the resolved alert occurrence."""
        return f"trigger.resolved.{self.trigger.content_hash()[:40]}"

    @property
    def subject(self) -> str:
        """`sreforge.trigger.resolved`."""
        return TRIGGER_RESOLVED_SUBJECT


class RunTriggered(_RunEvent):
    """The run's expected alert fired (confirm-fire passed); correlated signals attached."""

    type: Literal["RunTriggered"] = "RunTriggered"
    trigger: Trigger
    alert_fired_at: datetime


class BriefReady(_RunEvent):
    """The agent's on-call page (markdown) and the run contract, leak-checked."""

    type: Literal["BriefReady"] = "BriefReady"
    page: str = Field(min_length=1)
    contract: RunContract


class Submitted(_RunEvent):
    """The agent finished (or was stopped): its submission."""

    type: Literal["Submitted"] = "Submitted"
    submission: Submission


class CiResult(_RunEvent):
    """The CI gate's outcome on the submitted tree."""

    type: Literal["CiResult"] = "CiResult"
    green: bool
    output: str
    duration_ms: float = Field(ge=0)
    exit_code: int | None = None
    test_sets: list[CiTestSet] | None = None
    """The test sets that ran (submitted, handoff, hidden), in order, with their counts."""

    def outcome(self) -> CiOutcome:
        """The record's `ci` section."""
        return CiOutcome(
            green=self.green,
            output=self.output,
            duration_ms=self.duration_ms,
            exit_code=self.exit_code,
            test_sets=self.test_sets,
        )


class Deployed(_RunEvent):
    """The fix was merged and the service redeployed (or the redeploy failed)."""

    type: Literal["Deployed"] = "Deployed"
    redeployed: bool
    service: str = Field(min_length=1)
    duration_ms: float = Field(ge=0)
    readiness: Literal["passed", "failed", "skipped"] = "skipped"
    error: str | None = None

    def outcome(self) -> DeployOutcome:
        """The record's `deploy` section."""
        return DeployOutcome(
            redeployed=self.redeployed,
            service=self.service,
            duration_ms=self.duration_ms,
            readiness=self.readiness,
            error=self.error,
        )


class Scored(_RunEvent):
    """The oracle's score and every SLI / alert-state sample of the grading window."""

    type: Literal["Scored"] = "Scored"
    score: OracleScore
    verdict: Literal["passed", "failed", "rejected"]
    sli_series: list[SliSample] = Field(default_factory=list)


class Recorded(_RunEvent):
    """The record was written: where, its sha256 and its verdict."""

    type: Literal["Recorded"] = "Recorded"
    path: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[a-f0-9]{64}$")
    verdict: Verdict
    banked: bool = False
    bank_refusal: str | None = None
    """Why the record was not banked (e.g. no labelled agent transcript), when it was not."""


class CleanedUp(_RunEvent):
    """The stack is torn down; `verified` when nothing of the run is left."""

    type: Literal["CleanedUp"] = "CleanedUp"
    verified: bool
    leftovers: list[str] = Field(default_factory=list)


class RunFailed(_RunEvent):
    """A stage failed; the run ends aborted (setup, confirm-fire) or error (engine)."""

    type: Literal["RunFailed"] = "RunFailed"
    stage: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    verdict: Literal["aborted", "error"]

    def default_event_id(self) -> str:
        """`<run_id>.RunFailed.<stage>`: one failure per stage is kept."""
        return f"{self.run_id}.RunFailed.{self.stage}"
