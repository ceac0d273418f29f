"""A trigger: an alert or feed signal, normalised, with its correlated signals."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal

from pydantic import Field

from sreforge_contracts._base import Contract

__all__ = ["Trigger", "TriggerSignal", "TriggerStatus"]

TriggerStatus = Literal["firing", "resolved"]


class TriggerSignal(Contract):
    """One alert or feed signal; `signals[0]` of a trigger is its primary."""

    alert_name: str = Field(min_length=1)
    severity: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    fired_at: datetime
    fingerprint: str | None = None


class Trigger(Contract):
    """The alert that opens (or resolves) an incident, normalised from its source.

    `source` says where it came from (`alertmanager`, `prometheus-alert`, `feed`,
    `trigger-bus`); `signals` carries the signals correlated with it, primary first.
    """

    source: str = Field(min_length=1)
    alert_name: str = Field(min_length=1)
    severity: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    fired_at: datetime
    fingerprint: str | None = None
    status: TriggerStatus = "firing"
    signals: list[TriggerSignal] = Field(default_factory=list)
    route: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The opaque per-run route the notification arrived on; joins it to its run."""
    received_at: datetime | None = None
    """When the engine received the notification (`fired_at` is when the source fired)."""

    def content_hash(self) -> str:
        """A stable digest of what identifies this alert occurrence (not its annotations).

        A re-sent notification of the same firing (same labels, same start)
        hashes the same, so its event id dedupes on the bus.
        """
        identity = {
            "source": self.source,
            "alert_name": self.alert_name,
            "labels": dict(sorted(self.labels.items())),
            "fired_at": self.fired_at.isoformat(),
            "status": self.status,
            "route": self.route,
        }
        canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def primary(self) -> TriggerSignal:
        """This trigger as a signal (what `signals[0]` should be)."""
        return TriggerSignal(
            alert_name=self.alert_name,
            severity=self.severity,
            labels=self.labels,
            annotations=self.annotations,
            fired_at=self.fired_at,
            fingerprint=self.fingerprint,
        )
