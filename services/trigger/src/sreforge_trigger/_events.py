"""Turning a normalised `Trigger` into its bus event, and identity helpers shared by sources."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from sreforge_contracts import Trigger, TriggerFired, TriggerResolved

__all__ = [
    "PRODUCER",
    "TriggerEvent",
    "label_fingerprint",
    "occurrence_id",
    "trigger_event",
]

PRODUCER = "trigger"
TriggerEvent = TriggerFired | TriggerResolved

_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_SEPARATOR = 0xFF


def trigger_event(trigger: Trigger, event_id: str = "") -> TriggerEvent:
    """The `TriggerFired` or `TriggerResolved` carrying `trigger` (per its status).

    With no `event_id`, the contract's content hash of the trigger names the event.
    """
    if trigger.status == "firing":
        return TriggerFired(trigger=trigger, producer=PRODUCER, event_id=event_id)
    return TriggerResolved(trigger=trigger, producer=PRODUCER, event_id=event_id)


def occurrence_id(status: str, *parts: str) -> str:
    """A deterministic event id, `trigger.<status>.<digest>`, from the parts naming an occurrence.

    Parts are joined with a NUL, which none of them can contain, so distinct tuples
    never collide by concatenation.
    """
    kind = "fired" if status == "firing" else "resolved"
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]
    return f"trigger.{kind}.{digest}"


def label_fingerprint(labels: Mapping[str, str]) -> str:
    """The 16-hex fingerprint Prometheus and Alertmanager give a label set.

    FNV-1a 64 over the sorted names and values, each followed by a 0xff byte;
    lets polled alerts carry the same fingerprint their webhook twins do.
    """
    value = _FNV_OFFSET
    for name in sorted(labels):
        for chunk in (name.encode(), labels[name].encode()):
            for byte in (*chunk, _SEPARATOR):
                value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"
