"""The two model bases: strict for inbound messages, and the shared record rules."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict
from pydantic.config import JsonDict

__all__ = ["Contract", "schema_requires"]


class Contract(BaseModel):
    """A contract model: immutable, and unknown fields are an error.

    Records are read leniently (additive-only within v1.x) by pruning unknown
    keys before validation (see `_prune`), so producers still get the typo check.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


def schema_requires(*names: str) -> Callable[[JsonDict], None]:
    """A `json_schema_extra` hook listing defaulted fields as required in the JSON Schema.

    A record always carries its `record_version`, `kind` and friends even though
    the model fills them in by default; the schema says so.
    """

    def add(schema: JsonDict) -> None:
        required = schema.setdefault("required", [])
        assert isinstance(required, list)
        required.extend(name for name in names if name not in required)

    return add
