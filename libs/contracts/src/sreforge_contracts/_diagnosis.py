"""diagnosis.v1: the RCA judge's grade, reported beside the verdict, never inside it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from sreforge_contracts._base import Contract, schema_requires
from sreforge_contracts._errors import ContractError
from sreforge_contracts._prune import LENIENT, prune_when_lenient

__all__ = ["DIAGNOSIS_WEIGHTS", "Diagnosis", "DiagnosisAxes", "parse_diagnosis"]

DIAGNOSIS_WEIGHTS = {"root_cause_correct": 0.5, "evidence_grounded": 0.3, "no_false_lead": 0.2}


class DiagnosisAxes(Contract):
    """The judge's three booleans; `false_leads` true is bad (it blamed a ruled-out cause)."""

    root_cause_correct: bool
    evidence_grounded: bool
    false_leads: bool

    def score(self) -> float:
        """0.5·root_cause_correct + 0.3·evidence_grounded + 0.2·(no false lead), 1e-6 rounded."""
        total = (
            DIAGNOSIS_WEIGHTS["root_cause_correct"] * self.root_cause_correct
            + DIAGNOSIS_WEIGHTS["evidence_grounded"] * self.evidence_grounded
            + DIAGNOSIS_WEIGHTS["no_false_lead"] * (not self.false_leads)
        )
        return round(min(max(total, 0.0), 1.0), 6)


class Diagnosis(Contract):
    """`diagnosis.json`; `score` must equal the axes' weighted sum."""

    model_config = ConfigDict(json_schema_extra=schema_requires("schema_version", "rubric_version"))

    schema_version: Literal["diagnosis.v1"] = "diagnosis.v1"
    run_id: str = Field(min_length=1)
    scenario: str = Field(min_length=1)
    score: float = Field(ge=0, le=1)
    axes: DiagnosisAxes
    rationale: str
    rubric_version: str = "1"
    judge_model: str = Field(min_length=1)
    judged_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _ignore_unknown(cls, data: Any, info: ValidationInfo) -> Any:
        return prune_when_lenient(cls, data, info)

    @model_validator(mode="after")
    def _score_matches_axes(self) -> Diagnosis:
        expected = self.axes.score()
        if abs(self.score - expected) > 1e-6:
            raise ValueError(f"score {self.score} does not match the axes ({expected})")
        return self


def parse_diagnosis(data: bytes | str, source: str = "diagnosis.json") -> Diagnosis:
    """Read a diagnosis.json; unknown fields are ignored, errors name the field."""
    try:
        return Diagnosis.model_validate_json(data, context=LENIENT)
    except ValidationError as error:
        raise ContractError.from_validation(error, source) from None
