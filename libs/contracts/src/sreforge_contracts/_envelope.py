"""The event envelope every bus message carries."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import Field, model_validator

from sreforge_contracts._base import Contract

__all__ = ["CONTRACT_VERSION", "Event", "utcnow"]

CONTRACT_VERSION = "1.1"
"""1.1: `Submission.agent_dir`, `agent_files`, `agent_exit` (additive)."""


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class Event(Contract):
    """Envelope fields shared by every event; subclasses add a typed body.

    `event_id` is deterministic for a given fact (so JetStream dedupes a
    republished event through `Nats-Msg-Id`); left empty, it is derived by
    `default_event_id()` (`<run_id>.<type>` for once-per-run events). `subject`
    says where the event goes.
    """

    event_id: str = ""
    type: str
    run_id: str | None = None
    occurred_at: datetime = Field(default_factory=utcnow)
    producer: str = Field(min_length=1)
    contract_version: str = CONTRACT_VERSION

    @model_validator(mode="after")
    def _fill_event_id(self) -> Event:
        if not self.event_id:
            # Frozen model: the derived id is set once, here, before anyone sees it.
            object.__setattr__(self, "event_id", self.default_event_id())
        return self

    def default_event_id(self) -> str:
        """The deterministic id of this fact; once-per-run events use `<run_id>.<type>`."""
        if self.run_id is None:
            raise ValueError(f"event_id: {self.type} without run_id needs an explicit event_id")
        return f"{self.run_id}.{self.type}"

    @property
    def subject(self) -> str:
        """The NATS subject this event is published on."""
        if self.run_id is None:
            raise NotImplementedError(f"{type(self).__name__} must define its subject")
        return f"sreforge.run.{self.run_id}.{self.type}"
