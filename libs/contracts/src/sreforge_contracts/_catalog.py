"""The event catalog as one discriminated union, and `parse_event` off the wire."""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError

from sreforge_contracts._envelope import Event
from sreforge_contracts._errors import ContractError
from sreforge_contracts._events import (
    BriefReady,
    CiResult,
    CleanedUp,
    Deployed,
    FaultArmed,
    Recorded,
    RunFailed,
    RunRejected,
    RunRequested,
    RunTriggered,
    Scored,
    StackReady,
    Submitted,
    TriggerFired,
    TriggerResolved,
)
from sreforge_contracts._limits import check_message

__all__ = ["EVENT_TYPES", "AnyEvent", "parse_event"]

AnyEvent: TypeAlias = Annotated[
    RunRequested
    | RunRejected
    | StackReady
    | FaultArmed
    | TriggerFired
    | TriggerResolved
    | RunTriggered
    | BriefReady
    | Submitted
    | CiResult
    | Deployed
    | Scored
    | Recorded
    | CleanedUp
    | RunFailed,
    Field(discriminator="type"),
]
"""Any event of the catalog, told apart by its `type`."""

EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        RunRequested,
        RunRejected,
        StackReady,
        FaultArmed,
        TriggerFired,
        TriggerResolved,
        RunTriggered,
        BriefReady,
        Submitted,
        CiResult,
        Deployed,
        Scored,
        Recorded,
        CleanedUp,
        RunFailed,
    )
}
"""Event class by `type` name, in lifecycle order."""

_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)


def parse_event(data: bytes | str) -> Event:
    """Parse a bus message into its event class; ContractError names the field or limit."""
    check_message(data, "event")
    try:
        return _ADAPTER.validate_json(data)
    except ValidationError as error:
        tag = _tag_of(error)
        if tag is None:
            raise ContractError.from_validation(error, "event") from None
        raise ContractError.from_validation(error, f"event {tag}", skip_loc=1) from None


def _tag_of(error: ValidationError) -> str | None:
    """The event type a validation error happened inside, if the tag itself was fine."""
    for detail in error.errors(include_url=False):
        loc = detail["loc"]
        if loc and isinstance(loc[0], str) and loc[0] in EVENT_TYPES:
            return loc[0]
    return None
