"""Run and scenario identifiers: safe as a NATS subject token and a directory name."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import StringConstraints

from sreforge_contracts._errors import ContractError

__all__ = [
    "RUN_ID_PATTERN",
    "SCENARIO_ID_PATTERN",
    "RunId",
    "ScenarioId",
    "TopologyName",
    "check_run_id",
    "check_scenario_id",
    "new_run_id",
]

SCENARIO_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
RUN_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{2,63}$"

ScenarioId = Annotated[str, StringConstraints(pattern=SCENARIO_ID_PATTERN, max_length=100)]
"""A scenario slug (`latency-cache-stampede`); also its folder name."""

RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
"""A run id: lowercase letters, digits and dashes, 3-64 long (no dots, slashes, spaces)."""


TopologyName = Literal["local", "compose"]
"""Where a run's stack runs: child processes on loopback ports (`local`, the default) or
a Docker Compose project per run (`compose`)."""


def new_run_id(now: datetime | None = None) -> str:
    """Mint a fresh run id that sorts by start time: `20261129-073612-a1b2c3`."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def check_scenario_id(value: str, field: str = "scenario") -> str:
    """Return `value` if it is a valid scenario id, else raise ContractError naming `field`."""
    return _check(value, SCENARIO_ID_PATTERN, field, "scenario id")


def check_run_id(value: str, field: str = "run_id") -> str:
    """Return `value` if it is a valid run id, else raise ContractError naming `field`."""
    return _check(value, RUN_ID_PATTERN, field, "run id")


def _check(value: str, pattern: str, field: str, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise ContractError(
            f"{field}: invalid {what} {value!r}, expected to match {pattern}", field=field
        )
    return value
