"""run-record.v1: the immutable, schema-valid record every run ends in."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from sreforge_contracts._base import Contract, schema_requires
from sreforge_contracts._contract import Profile
from sreforge_contracts._errors import ContractError
from sreforge_contracts._ids import RunId, ScenarioId, TopologyName
from sreforge_contracts._prune import LENIENT, prune_when_lenient
from sreforge_contracts._record import OracleScore, SliSample, Verdict
from sreforge_contracts._submission import AgentExit
from sreforge_contracts._transcript import AgentTranscript, AgentTranscriptHeader
from sreforge_contracts._trigger import Trigger

__all__ = [
    "RECORD_VERSION",
    "CiOutcome",
    "CiTestSet",
    "DeployOutcome",
    "PhaseTimings",
    "RunRecord",
    "Trajectory",
    "canonical_json",
    "parse_run_record",
]

RECORD_VERSION = "1.2.0"
"""1.1.0: `trajectory.agent_exit` (how the agent's session ended); 1.2.0:
`trajectory.restarts` (agent sessions restarted after a runner crash)."""


def _transcript_kind(value: Any) -> str:
    """Full transcript when it carries a raw payload, else just its identity header."""
    if isinstance(value, AgentTranscript):
        return "AgentTranscript"
    full = isinstance(value, dict) and ("raw_json" in value or "raw_text" in value)
    return "AgentTranscript" if full else "AgentTranscriptHeader"


RecordedTranscript = Annotated[
    Annotated[AgentTranscript, Tag("AgentTranscript")]
    | Annotated[AgentTranscriptHeader, Tag("AgentTranscriptHeader")],
    Discriminator(_transcript_kind),
]
"""A record's `agent_transcript`: the full transcript, or (pruned) its header."""


class Trajectory(Contract):
    """What the agent produced; `transcript` is the engine runner's log (pruned away);
    `agent_exit` how its session ended (the pruned copy keeps no stderr lines);
    `restarts` how often a runner crash restarted the session from the hand-off state."""

    agent_name: str
    diff: str
    submitted: bool
    duration_ms: float = Field(ge=0)
    transcript: str | None = None
    agent_exit: AgentExit | None = None
    restarts: int = Field(default=0, ge=0)

    def pruned(self) -> Trajectory:
        """The committable copy: no runner log, no stderr lines of the agent."""
        agent_exit = self.agent_exit
        if agent_exit is not None:
            agent_exit = agent_exit.model_copy(update={"stderr_tail": ()})
        return self.model_copy(update={"transcript": None, "agent_exit": agent_exit})


class CiTestSet(Contract):
    """One test set the CI gate ran against the submitted code, with pytest's counts.

    `submitted`: the tests as the agent left them; `handoff`: the hand-off commit's tests
    and test configuration restored over the submitted code; `hidden`: the scenario's
    `verify/ci/` tests, never agent-visible. A patch scenario's graded sets,
    `fail_to_pass` (`verify/fail_to_pass/`) and `pass_to_pass` (`verify/pass_to_pass/`),
    are hidden too and do not decide `green` of the gate; they list each test by its
    JUnit id in `passed_tests` and `failed_tests` (failed, errored or skipped).
    `exit_code` is None when the set timed out.
    """

    name: Literal["submitted", "handoff", "hidden", "fail_to_pass", "pass_to_pass"]
    green: bool
    exit_code: int | None = None
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    errors: int = Field(default=0, ge=0)
    duration_ms: float = Field(default=0, ge=0)
    passed_tests: list[str] | None = None
    failed_tests: list[str] | None = None


class CiOutcome(Contract):
    """The CI gate: build + the app's own tests on the submitted tree.

    `test_sets` names the sets that ran, in order (absent in records made before them).
    """

    green: bool
    output: str
    duration_ms: float = Field(ge=0)
    exit_code: int | None = None
    test_sets: list[CiTestSet] | None = None


class DeployOutcome(Contract):
    """The merge + redeploy of the affected service, and the readiness gate's outcome."""

    redeployed: bool
    service: str
    duration_ms: float = Field(ge=0)
    readiness: Literal["passed", "failed", "skipped"] | None = None
    error: str | None = None


class PhaseTimings(Contract):
    """Milliseconds spent per phase; a phase not reached is absent."""

    stack: float | None = Field(default=None, ge=0)
    arm: float | None = Field(default=None, ge=0)
    trigger: float | None = Field(default=None, ge=0)
    context: float | None = Field(default=None, ge=0)
    run: float | None = Field(default=None, ge=0)
    ci: float | None = Field(default=None, ge=0)
    merge: float | None = Field(default=None, ge=0)
    redeploy: float | None = Field(default=None, ge=0)
    verify: float | None = Field(default=None, ge=0)
    record: float | None = Field(default=None, ge=0)
    cleanup: float | None = Field(default=None, ge=0)
    total: float | None = Field(default=None, ge=0)


class RunRecord(Contract):
    """run-record.v1. `parse_run_record` ignores unknown fields (additive-only within v1.x);
    building one in code still refuses a misspelt field.

    `trigger` is null only when no alert ever fired (a confirm-fire abort).
    `ci` / `deploy` are null when the run did not get that far. Optional:
    `agent_transcript` (header, or full with raw payload), `full_record_sha256`
    (set on pruned records), and SREForge's `time_scale`, `sli_series`,
    `abort_reason`, `engine_version`, `proof_run`, `topology`.
    """

    model_config = ConfigDict(
        json_schema_extra=schema_requires("record_version", "kind", "timings")
    )

    record_version: str = Field(default=RECORD_VERSION, pattern=r"^1\.[0-9]+\.[0-9]+$")
    kind: Literal["run-record"] = "run-record"
    run_id: RunId
    scenario_id: ScenarioId
    profile: Profile
    trigger: Trigger | None
    trajectory: Trajectory
    diff: str
    ci: CiOutcome | None
    deploy: DeployOutcome | None
    score: OracleScore
    verdict: Verdict
    timings: PhaseTimings = Field(default_factory=PhaseTimings)
    started_at: datetime
    finished_at: datetime
    agent_transcript: RecordedTranscript | None = None
    full_record_sha256: str | None = Field(default=None, pattern=r"^[a-f0-9]{64}$")
    time_scale: float | None = Field(default=None, gt=0, le=1)
    sli_series: list[SliSample] | None = None
    abort_reason: str | None = None
    engine_version: str | None = None
    proof_run: bool = False
    """True when the agent's profile was unverified: a labelled proof run, never banked."""
    topology: TopologyName | None = None
    """Where the run's stack ran (`local`, `compose`); None in records before 1.x adds it."""

    @model_validator(mode="before")
    @classmethod
    def _ignore_unknown(cls, data: Any, info: ValidationInfo) -> Any:
        return prune_when_lenient(cls, data, info)

    @property
    def is_smoke(self) -> bool:
        """A verdict at time_scale < 1 is a smoke verdict, not a quotable one."""
        return self.time_scale is not None and self.time_scale < 1

    @property
    def is_bankable(self) -> bool:
        """Whether banking accepts it: a labelled agent_transcript header, not a proof run."""
        return self.agent_transcript is not None and not self.proof_run

    def canonical_json(self) -> str:
        """Keys sorted recursively, 2-space indent, trailing newline."""
        return canonical_json(self.model_dump(mode="json"))

    def sha256(self) -> str:
        """The sha256 of the canonical JSON (the full-record store address)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def pruned(self) -> RunRecord:
        """The committable copy: no runner log, no raw agent payload or stderr lines, and
        the sha of the full one."""
        header = self.agent_transcript
        if isinstance(header, AgentTranscript):
            header = header.header()
        return self.model_copy(
            update={
                "trajectory": self.trajectory.pruned(),
                "agent_transcript": header,
                "full_record_sha256": self.sha256(),
            }
        )


def canonical_json(data: Any) -> str:
    """Serialise JSON-ready data the canonical way (what the record sha256 is taken over)."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def parse_run_record(data: bytes | str, source: str = "record.json") -> RunRecord:
    """Read a record.json; unknown fields (from a later v1.x) are ignored at every level."""
    try:
        return RunRecord.model_validate_json(data, context=LENIENT)
    except ValidationError as error:
        raise ContractError.from_validation(error, source) from None
