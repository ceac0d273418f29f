"""The `run.start` command and its reply."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, ValidationError, model_validator

from sreforge_contracts._base import Contract
from sreforge_contracts._errors import ContractError
from sreforge_contracts._ids import RunId, ScenarioId, TopologyName
from sreforge_contracts._limits import check_message
from sreforge_contracts._subjects import RUN_START_SUBJECT

__all__ = ["RunStart", "RunStartReply", "parse_run_start"]


class RunStart(Contract):
    """Start a run of `scenario` with the agent profile `agent`.

    `time_scale` (0 < s ≤ 1) shrinks every system duration uniformly (a smoke
    run below 1); `run_id` is minted by the correlator when absent; `topology`
    says where the run's stack runs (None: where the scenario's stack declares, else
    `local`).
    """

    SUBJECT: ClassVar[str] = RUN_START_SUBJECT

    scenario: ScenarioId
    agent: str = Field(min_length=1, max_length=100)
    time_scale: float = Field(default=1.0, gt=0, le=1)
    run_id: RunId | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    topology: TopologyName | None = None


class RunStartReply(Contract):
    """The reply to `run.start`: the accepted run id, or why it was refused."""

    accepted: bool
    run_id: RunId | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> RunStartReply:
        if self.accepted and self.run_id is None:
            raise ValueError("an accepted run.start reply carries its run_id")
        if not self.accepted and not self.error:
            raise ValueError("a refused run.start reply says why in error")
        return self


def parse_run_start(data: bytes | str) -> RunStart:
    """Parse a `run.start` message; unknown fields, bad ids and size limits are named."""
    check_message(data, "run.start")
    try:
        return RunStart.model_validate_json(data)
    except ValidationError as error:
        raise ContractError.from_validation(error, "run.start") from None
