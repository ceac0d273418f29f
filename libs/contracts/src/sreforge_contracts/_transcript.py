"""agent-transcript.v1: who ran the agent, under what confinement, and what it said."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, JsonValue, model_validator
from pydantic.config import JsonDict

from sreforge_contracts._base import Contract, schema_requires

__all__ = ["AgentTranscript", "AgentTranscriptHeader", "Confinement"]

Confinement = Literal["host-open", "host-sandboxed", "in-box"]
"""Where the agent ran; a record without it cannot be banked as a verdict."""


def _exactly_one_payload(schema: JsonDict) -> None:
    """The schema says what the model validator says: one non-null raw payload."""
    schema["oneOf"] = [
        {"required": ["raw_text"], "properties": {"raw_text": {"type": "string"}}},
        {"required": ["raw_json"], "properties": {"raw_json": {"not": {"type": "null"}}}},
    ]
    schema_requires("schema_version")(schema)


class AgentTranscriptHeader(Contract):
    """The identity header kept in pruned records: harness, model, confinement, when."""

    model_config = ConfigDict(json_schema_extra=schema_requires("schema_version"))

    schema_version: Literal["agent-transcript.v1"] = "agent-transcript.v1"
    run_id: str = Field(min_length=1)
    harness: str = Field(min_length=1)
    session: str = Field(default="cold", min_length=1)
    confinement: Confinement
    preflight: Literal["ok", "skipped"] = "skipped"
    captured_at: datetime
    model: str | None = None
    provider: str | None = None
    submitted: bool | None = None


class AgentTranscript(AgentTranscriptHeader):
    """`agent-transcript.json`: the header plus exactly one of `raw_json` / `raw_text`."""

    model_config = ConfigDict(json_schema_extra=_exactly_one_payload)

    raw_json: JsonValue = None
    raw_text: str | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> AgentTranscript:
        if (self.raw_json is None) == (self.raw_text is None):
            raise ValueError("exactly one of raw_json or raw_text is required")
        return self

    def header(self) -> AgentTranscriptHeader:
        """The transcript without its raw payload (what a pruned record keeps)."""
        return AgentTranscriptHeader.model_validate(
            self.model_dump(exclude={"raw_json", "raw_text"})
        )
