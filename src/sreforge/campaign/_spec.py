"""The campaign file (TOML): scenarios, agents, trials, time scale, how many runs at once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sreforge_contracts import SCENARIO_ID_PATTERN, TopologyName

from sreforge.campaign._errors import CampaignError

__all__ = ["CampaignSpec", "load_spec", "parse_spec"]


class CampaignSpec(BaseModel):
    """What one campaign runs: every agent on every scenario, `trials` times each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenarios: tuple[str, ...] = Field(min_length=1)
    agents: tuple[str, ...] = Field(min_length=1)
    trials: int = Field(default=1, ge=1, le=1000)
    time_scale: float = Field(default=1.0, gt=0, le=1)
    concurrency: int = Field(default=1, ge=1, le=64)
    topology: TopologyName = "local"
    k: int | None = Field(default=None, ge=1)
    """The k of the pass@k / pass^k columns `campaign show` prints (default: `trials`)."""
    stack_memory_mb: float = Field(default=200.0, gt=0)
    """What one run's stack is expected to take at its peak (SPEC §11: ≤ 200 MB)."""
    reserve_memory_mb: float = Field(default=512.0, ge=0)
    """Memory left free for everything else: a run starts only above stack + reserve."""
    once: tuple[str, ...] = ()
    """Agents (of `agents`) run a single trial per scenario whatever `trials` says (e.g. the
    integrity cheats of a qualification)."""

    @model_validator(mode="after")
    def _well_formed(self) -> CampaignSpec:
        for scenario in self.scenarios:
            if not re.fullmatch(SCENARIO_ID_PATTERN, scenario):
                raise ValueError(f"scenarios: {scenario!r} is not a scenario id")
        for field, values in (("scenarios", self.scenarios), ("agents", self.agents)):
            if len(set(values)) != len(values):
                raise ValueError(f"{field}: listed twice: {sorted(_twice(values))}")
        if unknown := sorted(set(self.once) - set(self.agents)):
            raise ValueError(f"once: not in agents: {unknown}")
        if self.k is not None and self.k > self.trials:
            raise ValueError(f"k: {self.k} is more than trials ({self.trials})")
        return self

    @property
    def pass_k(self) -> int:
        """The k `campaign show` reports pass@k and pass^k for."""
        return self.k or self.trials

    def to_toml(self) -> str:
        """The spec as TOML (what `campaigns/<id>/campaign.toml` holds)."""
        lines = []
        for name, value in self.model_dump(exclude_none=True).items():
            lines.append(f"{name} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"


def _twice(values: tuple[str, ...]) -> set[str]:
    return {value for value in values if values.count(value) > 1}


def _toml_value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def parse_spec(text: str, source: str, overrides: dict[str, Any] | None = None) -> CampaignSpec:
    """Parse a campaign TOML; `overrides` (from flags, None values ignored) win over the file.

    Raises CampaignError naming `source` and the offending field.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CampaignError(f"{source}: not valid TOML: {error}") from None
    data.update({key: value for key, value in (overrides or {}).items() if value is not None})
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as error:
        raise CampaignError(f"{source}: {_first_problem(error)}") from None


def _first_problem(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field (expected: " + ", ".join(CampaignSpec.model_fields) + ")"
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> CampaignSpec:
    """Read and parse the campaign file at `path`."""
    try:
        text = path.read_text()
    except OSError as error:
        raise CampaignError(f"cannot read campaign file {path}: {error.strerror}") from None
    return parse_spec(text, str(path), overrides)
