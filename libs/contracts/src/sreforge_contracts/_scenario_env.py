"""The stack-side `scenario.env`: how a scenario's fault is delivered and loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from sreforge_contracts._base import Contract
from sreforge_contracts._errors import ContractError

__all__ = [
    "Database",
    "DeliveryMode",
    "ScenarioEnv",
    "UpstreamProfile",
    "load_scenario_env",
    "parse_scenario_env",
]

DeliveryMode = Literal["setup-baked", "arm-deploy-recent", "arm-runtime-notrace", "multi-commit"]
"""How the fault arrives: baked into the anchor, a recent deploy commit, a runtime
env override with no code trace, or an ordered series of commits."""

UpstreamProfile = Literal["steady", "flaky-lookups", "brownout", "holdings-hiccups"]
"""How the stack's upstream behaves for the whole run, as its own `--profile` defines it:
`steady` answers every lookup; `flaky-lookups` answers a fixed share of them with an
instant 503 while its traffic is sustained; `brownout` serves a few lookups at a time
and slows down for a few seconds once its traffic is sustained; `holdings-hiccups` counts
holdings one at a time and pauses briefly every few seconds. One knob for every
upstream condition a scenario needs (one more name here and in the upstream's table)."""

Database = Literal["sqlite", "postgres"]
"""Where the service keeps its data for the run: the stack's SQLite file (the default), or
a PostgreSQL server of the run's own (local topology only; the stack's `[postgres]`)."""

_KNOWN = {
    "DATABASE",
    "DELIVERY_MODE",
    "RUNTIME_ENV_VAR",
    "RUNTIME_ENV_VALUE",
    "READINESS_GATE",
    "LOAD_PROFILE",
    "LOAD_RATE",
    "SERVICE_MEMORY_LIMIT_MB",
    "UPSTREAM_PROFILE",
}


class ScenarioEnv(Contract):
    """`environment/scenario.env`, typed. Other keys (e.g. `CHANGE_1`) stay in `extra`."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    delivery_mode: DeliveryMode = Field(alias="DELIVERY_MODE")
    runtime_env_var: str | None = Field(default=None, alias="RUNTIME_ENV_VAR", min_length=1)
    runtime_env_value: str | None = Field(default=None, alias="RUNTIME_ENV_VALUE")
    readiness_gate: Literal["on", "off"] = Field(default="off", alias="READINESS_GATE")
    load_profile: str | None = Field(default=None, alias="LOAD_PROFILE", min_length=1)
    load_rate: float | None = Field(default=None, alias="LOAD_RATE", gt=0)
    service_memory_limit_mb: int | None = Field(default=None, alias="SERVICE_MEMORY_LIMIT_MB", gt=0)
    """The service's memory limit for this scenario (the topology enforces it), over the
    stack's `memory_limit_mb`."""
    upstream_profile: UpstreamProfile = Field(default="steady", alias="UPSTREAM_PROFILE")
    database: Database = Field(default="sqlite", alias="DATABASE")
    extra: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _runtime_env_pairs(self) -> ScenarioEnv:
        has_var = self.runtime_env_var is not None
        if has_var != (self.runtime_env_value is not None):
            raise ValueError("RUNTIME_ENV_VAR and RUNTIME_ENV_VALUE must be set together")
        if self.delivery_mode == "arm-runtime-notrace" and not has_var:
            raise ValueError("arm-runtime-notrace needs RUNTIME_ENV_VAR and RUNTIME_ENV_VALUE")
        return self

    @property
    def runtime_override(self) -> str | None:
        """The runtime override as the service's environment holds it (`VAR=VALUE`), if any."""
        if self.runtime_env_var is None:
            return None
        return f"{self.runtime_env_var}={self.runtime_env_value or ''}"

    @property
    def readiness_gate_on(self) -> bool:
        """Whether the deploy drains load, deploys cold, warms up, then resumes load."""
        return self.readiness_gate == "on"


def parse_scenario_env(text: str, source: str = "scenario.env") -> ScenarioEnv:
    """Parse KEY=VALUE lines (`#` comments, blank lines, optional quotes) into a ScenarioEnv."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ContractError(
                f"{source}:{number}: expected KEY=VALUE, got {raw!r}", source=source
            )
        values[key] = _unquote(value.strip())
    known: dict[str, object] = {k: v for k, v in values.items() if k in _KNOWN}
    known["extra"] = {k: v for k, v in values.items() if k not in _KNOWN}
    try:
        return ScenarioEnv.model_validate(known)
    except ValidationError as error:
        raise ContractError.from_validation(error, source) from None


def load_scenario_env(path: str | Path) -> ScenarioEnv:
    """Read and parse a `scenario.env` file; errors name the file and the key."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ContractError(f"{file}: cannot read: {error.strerror}", source=str(file)) from None
    return parse_scenario_env(text, str(file))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
