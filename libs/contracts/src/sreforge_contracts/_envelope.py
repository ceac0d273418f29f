"""The event envelope every bus message carries."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CONTRACT_VERSION", "Event", "utcnow"]

CONTRACT_VERSION = "1.0"


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class Event(BaseModel):
    """Envelope fields shared by every event; subclasses add a typed body.

    `event_id` is deterministic for a given fact (so JetStream dedupes a
    republished event through `Nats-Msg-Id`), and `subject` says where it goes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_id: str = Field(min_length=1)
    type: str
    run_id: str | None = None
    occurred_at: datetime = Field(default_factory=utcnow)
    producer: str
    contract_version: str = CONTRACT_VERSION

    @property
    def subject(self) -> str:
        """The NATS subject this event is published on."""
        if self.run_id is None:
            raise NotImplementedError(f"{type(self).__name__} must define its subject")
        return f"sreforge.run.{self.run_id}.{self.type}"
