"""The stack description (`stack.toml`) and the scenario facts the topology needs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sreforge_confine import ConfinementError, parse_host_port
from sreforge_contracts import ContractError, TopologyName, find_scenario, load_scenario

from sreforge_deployer._errors import StackSpecError

__all__ = [
    "WORKSPACE_CWD",
    "ComponentSpec",
    "DeliveryMode",
    "PostgresSpec",
    "ScenarioSetup",
    "SeedSpec",
    "StackSpec",
    "find_scenario_dir",
    "load_scenario_setup",
    "load_stack_spec",
    "memory_limit_mb",
    "refuse_postgres",
]

WORKSPACE_CWD = "workspace"
DeliveryMode = Literal["setup-baked", "arm-deploy-recent", "arm-runtime-notrace", "multi-commit"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SeedSpec(_Strict):
    """A one-shot command run before the components start (e.g. writing the DB)."""

    cwd: str
    argv: list[str] = Field(min_length=1)
    timeout_seconds: float = Field(default=60.0, gt=0)


class ComponentSpec(_Strict):
    """One long-running process of the stack."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    job: str | None = None
    cwd: str
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    scaled_env: dict[str, float] = Field(default_factory=dict)
    health: str | None = None
    metrics: str | None = None
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    stop_timeout_seconds: float = Field(default=10.0, gt=0)
    pause: str | None = None
    resume: str | None = None
    warmup: str | None = None
    reaches: list[str] = Field(default_factory=list)
    """Components the (confined) service may dial: its declared dependencies."""
    egress: list[str] = Field(default_factory=list)
    """Further loopback `HOST:PORT` endpoints the service may dial (e.g. a database)."""
    memory_limit_mb: int | None = Field(default=None, gt=0)
    """The memory the component's processes may use together, enforced by the topology
    (a cgroup locally, the container's limit on compose); past it the kernel kills."""

    @field_validator("egress")
    @classmethod
    def _egress_is_loopback(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                parse_host_port(text)
            except ConfinementError as error:
                raise ValueError(str(error)) from error
        return value

    @property
    def is_load(self) -> bool:
        """Whether this is the load generator (it can be paused and resumed)."""
        return self.pause is not None and self.resume is not None


class PostgresSpec(_Strict):
    """How the stack runs on PostgreSQL (a scenario's `DATABASE=postgres`)."""

    env: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    """The service's variable that receives the run's database URL."""
    seed_argv: list[str] = Field(min_length=1)
    """Run after the seed, with `{database_url}`: fills the database the way the seed
    filled `{db_path}`."""
    timeout_seconds: float = Field(default=120.0, gt=0)


class StackSpec(_Strict):
    """A whole stack: its components in start order, seed, service and template dir."""

    name: str
    service: str
    workspace_source: str
    observability: str
    seed: SeedSpec | None = None
    postgres: PostgresSpec | None = None
    """Present when the stack can run on PostgreSQL."""
    components: list[ComponentSpec] = Field(min_length=1)
    topology: TopologyName | None = None
    """The topology a run of this stack gets when its `run.start` names none (else local)."""
    root: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _service_is_a_component(self) -> StackSpec:
        names = [component.name for component in self.components]
        if len(set(names)) != len(names):
            raise ValueError(f"component names must be unique, got {names}")
        if self.service not in names:
            raise ValueError(f"service {self.service!r} is not one of the components {names}")
        for component in self.components:
            if component.name != self.service and (component.reaches or component.egress):
                raise ValueError(
                    f"component {component.name!r}: only the service ({self.service!r}) is "
                    "confined, so only it declares `reaches` / `egress`"
                )
        service = self.component(self.service)
        for name in service.reaches:
            if name not in names or name == self.service:
                raise ValueError(
                    f"component {self.service!r}: reaches {name!r}, which is not another "
                    f"component (have {names})"
                )
        return self

    def component(self, name: str) -> ComponentSpec:
        """The component called `name`."""
        return next(c for c in self.components if c.name == name)

    @property
    def load(self) -> ComponentSpec | None:
        """The load generator component, if the stack has one."""
        return next((c for c in self.components if c.is_load), None)

    @property
    def upstreams(self) -> list[ComponentSpec]:
        """Components that are neither the service nor the load generator."""
        return [c for c in self.components if c.name != self.service and not c.is_load]


def load_stack_spec(stack_dir: Path) -> StackSpec:
    """Parse `<stack_dir>/stack.toml`, naming the file in any error."""
    path = stack_dir / "stack.toml"
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError as error:
        raise StackSpecError("stack description missing", source=path) from error
    except tomllib.TOMLDecodeError as error:
        raise StackSpecError(f"malformed TOML: {error}", source=path) from error
    try:
        return StackSpec.model_validate({**raw, "root": stack_dir.resolve()})
    except ValidationError as error:
        raise StackSpecError(_first_problem(error), source=path) from error


def _first_problem(error: ValidationError) -> str:
    detail = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in detail["loc"])
    return f"{where}: {detail['msg']}" if where else detail["msg"]


class ScenarioSetup(_Strict):
    """What the topology needs from a scenario folder (a narrow view of the manifest)."""

    scenario_id: str
    directory: Path
    stack_dir: Path
    delivery_mode: DeliveryMode
    runtime_env: dict[str, str] = Field(default_factory=dict)
    readiness_gate: bool = True
    load_profile: str
    load_rate: str
    # The upstream's behaviour for the run (`UPSTREAM_PROFILE`; stack.toml's {upstream_profile}).
    upstream_profile: str = "steady"
    inject_patches: list[Path] = Field(default_factory=list)
    expected_alert: str = ""
    confirm_fire_seconds: float = 240.0
    sustained_clear_seconds: float = 360.0
    max_clear_seconds: float = 600.0
    service_memory_limit_mb: int | None = None
    """The scenario's sizing of the service (`SERVICE_MEMORY_LIMIT_MB`), over the stack's."""
    database: Literal["sqlite", "postgres"] = "sqlite"
    """Where the service keeps its data (`DATABASE`): the SQLite file, or a PostgreSQL
    server of the run's own (the local topology only)."""


def refuse_postgres(setup: ScenarioSetup, where: str) -> None:
    """`StackSpecError` naming `DATABASE` when the scenario asks `where` for PostgreSQL,
    which only the local topology runs."""
    if setup.database == "postgres":
        raise StackSpecError(
            f"DATABASE=postgres: {where} does not run a PostgreSQL server (only the local "
            "topology does); run this scenario on the local topology",
            source=setup.directory / "environment" / "scenario.env",
        )


def memory_limit_mb(spec: StackSpec, setup: ScenarioSetup, component: ComponentSpec) -> int | None:
    """A component's memory limit in a scenario's run: the scenario's for the service,
    else the stack's (None: unlimited)."""
    if component.name == spec.service and setup.service_memory_limit_mb is not None:
        return setup.service_memory_limit_mb
    return component.memory_limit_mb


def load_scenario_setup(scenario_dir: Path) -> ScenarioSetup:
    """The topology's view of a scenario folder, read through `sreforge_contracts`."""
    scenario_dir = scenario_dir.resolve()
    try:
        scenario = load_scenario(scenario_dir)
    except ContractError as error:
        raise StackSpecError(str(error)) from error
    env_path = scenario_dir / "environment" / "scenario.env"
    if scenario.env is None:
        raise StackSpecError("scenario environment missing", source=env_path)
    manifest, env = scenario.manifest, scenario.env
    runtime = {env.runtime_env_var: env.runtime_env_value or ""} if env.runtime_env_var else {}
    stack_dir = scenario_dir.parent.parent / "stacks" / manifest.stack
    if not (stack_dir / "stack.toml").is_file():
        raise StackSpecError(
            f"stack {manifest.stack!r} not found at {stack_dir}",
            source=scenario_dir / "scenario.toml",
        )
    return ScenarioSetup(
        scenario_id=manifest.id,
        directory=scenario_dir,
        stack_dir=stack_dir,
        delivery_mode=env.delivery_mode,
        runtime_env=runtime,
        readiness_gate=env.readiness_gate_on,
        load_profile=env.load_profile or "",
        load_rate=f"{env.load_rate:g}" if env.load_rate is not None else "",
        upstream_profile=env.upstream_profile,
        inject_patches=sorted((scenario_dir / "inject").glob("*.patch")),
        expected_alert=manifest.expected.alert if manifest.expected else "",
        confirm_fire_seconds=manifest.determinism.confirm_fire_timeout_seconds,
        sustained_clear_seconds=manifest.determinism.sustained_clear_seconds,
        max_clear_seconds=manifest.determinism.max_clear_time_seconds,
        service_memory_limit_mb=env.service_memory_limit_mb,
        database=env.database,
    )


def find_scenario_dir(use_cases: Path, scenario_id: str) -> Path:
    """`<use_cases>/<use-case>/scenarios/<scenario_id>/`; `StackSpecError` when absent."""
    try:
        return find_scenario(use_cases, scenario_id).path
    except ContractError as error:
        raise StackSpecError(str(error)) from error
