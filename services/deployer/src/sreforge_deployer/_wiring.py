"""How a stack's declarative components become concrete launches for one run.

Fills `{placeholders}` in argv/env, scales `scaled_env`, points cwd at the stack dir or
the run's workspace, and gives the observability templates their targets. The
service (run from the agent's workspace) is launched inside its jail (`_confine`):
it reaches only the components it `reaches` and its `egress` endpoints, and the
host reaches it on its own port through the jail's relay.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sreforge_confine import Endpoint, Jail, parse_host_port

from sreforge_deployer._confine import (
    JAIL_HOME,
    confine,
    confinement_for,
    seed_jail,
    service_jail,
)
from sreforge_deployer._errors import StackSpecError
from sreforge_deployer._memory import MemoryLimit, cgroup_name
from sreforge_deployer._process import LaunchSpec, resolve_binary
from sreforge_deployer._run import RunLayout
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import (
    WORKSPACE_CWD,
    ComponentSpec,
    ScenarioSetup,
    StackSpec,
    memory_limit_mb,
)

__all__ = ["ALERTMANAGER", "PROMETHEUS", "Wiring", "fill_template"]

PROMETHEUS = "prometheus"
ALERTMANAGER = "alertmanager"
_BASELINE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


@dataclass(frozen=True)
class Wiring:
    """One run's concrete layout: where things live and which port each component has."""

    spec: StackSpec
    setup: ScenarioSetup
    settings: DeployerSettings
    run_dir: Path
    ports: dict[str, int]
    time_scale: float
    database_url: str | None = None
    """The run's PostgreSQL database (a scenario's `DATABASE=postgres`), else None."""

    @property
    def workspace_dir(self) -> Path:
        """The run's git workspace (the service runs from it)."""
        return RunLayout(self.run_dir).workspace

    @property
    def data_dir(self) -> Path:
        """The run's data (the service's SQLite file): the one folder the service may write."""
        return RunLayout(self.run_dir).data

    @property
    def log_dir(self) -> Path:
        """Where every component's log file goes."""
        return RunLayout(self.run_dir).logs

    def url(self, name: str) -> str:
        """`http://127.0.0.1:<port>` of a component."""
        return f"http://127.0.0.1:{self.ports[name]}"

    def base_env(self) -> dict[str, str]:
        """A scrubbed environment: nothing of the operator's or the harness's leaks in."""
        env = {key: os.environ[key] for key in _BASELINE_ENV if key in os.environ}
        return {**env, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}

    def seed_launch(self, *, confined: bool = False) -> LaunchSpec | None:
        """The one-shot seed command, if the stack has one.

        A run seeds from the workspace the harness built, before the agent has it; a seed
        of a submitted tree (the patch judge's) is `confined` like the service.
        """
        seed = self.spec.seed
        if seed is None:
            return None
        values = self._placeholders(None)
        launch = LaunchSpec(
            name="seed",
            argv=[fill_template(arg, values, "seed") for arg in seed.argv],
            cwd=self._cwd(seed.cwd),
            env=self.base_env(),
            log_path=self.log_dir / "seed.log",
            startup_timeout_seconds=seed.timeout_seconds,
        )
        if not confined:
            return launch
        return self._jailed(
            launch,
            lambda argv: seed_jail(
                argv,
                launch.cwd,
                workspace=self.workspace_dir,
                data_dir=self.data_dir,
                python=self.settings.python,
            ),
        )

    def postgres_seed_launch(self) -> LaunchSpec | None:
        """The stack's Postgres seed (`[postgres].seed_argv`), for a run on PostgreSQL."""
        postgres = self.spec.postgres
        if postgres is None or self.database_url is None:
            return None
        values = self._placeholders(None)
        return LaunchSpec(
            name="seed-postgres",
            argv=[fill_template(arg, values, "postgres") for arg in postgres.seed_argv],
            cwd=self.workspace_dir,
            env=self.base_env(),
            log_path=self.log_dir / "seed.log",
            startup_timeout_seconds=postgres.timeout_seconds,
        )

    def launch(self, component: ComponentSpec, runtime_env: dict[str, str]) -> LaunchSpec:
        """The concrete launch of `component` (the service also gets `runtime_env`)."""
        values = self._placeholders(component)
        argv = [fill_template(arg, values, component.name) for arg in component.argv]
        if component.is_load:
            argv.append("--paused")  # load begins when the run says so, never at boot
        env = {
            **self.base_env(),
            **{
                key: fill_template(value, values, component.name)
                for key, value in component.env.items()
            },
            **{key: f"{real * self.time_scale:g}" for key, real in component.scaled_env.items()},
        }
        if component.name == self.spec.service:
            if self.spec.postgres is not None and self.database_url is not None:
                env[self.spec.postgres.env] = self.database_url
            env.update(runtime_env)
        port = self.ports[component.name]
        launch = LaunchSpec(
            name=component.name,
            argv=argv,
            cwd=self._cwd(component.cwd),
            env=env,
            log_path=self.log_dir / f"{component.name}.log",
            port=port,
            health_url=f"http://127.0.0.1:{port}{component.health}" if component.health else None,
            startup_timeout_seconds=component.startup_timeout_seconds,
        )
        limit_mb = memory_limit_mb(self.spec, self.setup, component)
        if limit_mb is not None:
            name = cgroup_name(self.run_dir.name, component.name)
            launch = dataclasses.replace(launch, memory_limit=MemoryLimit(name, limit_mb))
        return self._confined(component, launch) if component.name == self.spec.service else launch

    def _confined(self, component: ComponentSpec, launch: LaunchSpec) -> LaunchSpec:
        """`launch` inside the service's jail (its own argv resolved on the host first)."""
        port = launch.port
        assert port is not None
        outbound = [Endpoint("127.0.0.1", self.ports[name]) for name in component.reaches]
        outbound += [parse_host_port(text) for text in component.egress]
        if self.database_url is not None:
            server = urlsplit(self.database_url)
            outbound.append(parse_host_port(f"{server.hostname}:{server.port}"))
        return self._jailed(
            launch,
            lambda argv: service_jail(
                argv,
                launch.cwd,
                workspace=self.workspace_dir,
                data_dir=self.data_dir,
                python=self.settings.python,
                outbound=outbound,
                port=port,
                relay_dir=self.run_dir / "net" / component.name,
            ),
        )

    def _jailed(self, launch: LaunchSpec, jail_of: Callable[[list[str]], Jail]) -> LaunchSpec:
        """`launch` inside the jail `jail_of` makes for its argv (the binary resolved on
        the host first), with the jail's own HOME and TMPDIR."""
        binary = resolve_binary(launch.name, launch.argv[0], launch.env)
        confined = confine(
            confinement_for(self.settings.bwrap_path), jail_of([binary, *launch.argv[1:]])
        )
        env = {**launch.env, "HOME": JAIL_HOME, "TMPDIR": JAIL_HOME}
        return dataclasses.replace(launch, argv=confined.argv, env=env, folders=confined.folders)

    def template_values(self, webhook_url: str, token_file: Path) -> dict[str, str]:
        """Values for the observability templates' `${placeholders}`."""
        values = {
            "alertmanager_target": f"127.0.0.1:{self.ports[ALERTMANAGER]}",
            "app_target": f"127.0.0.1:{self.ports[self.spec.service]}",
            "webhook_url": webhook_url,
            "webhook_token_file": str(token_file),
        }
        if self.spec.upstreams:
            values["upstream_target"] = f"127.0.0.1:{self.ports[self.spec.upstreams[0].name]}"
        if self.spec.load is not None:
            values["loadgen_target"] = f"127.0.0.1:{self.ports[self.spec.load.name]}"
        for component in self.spec.components:
            key = f"{component.name.replace('-', '_')}_target"
            values[key] = f"127.0.0.1:{self.ports[component.name]}"
        return values

    def _placeholders(self, component: ComponentSpec | None) -> dict[str, str]:
        values = {
            "python": self.settings.python,
            "host": "127.0.0.1",
            "db_path": str(self.data_dir / f"{self.spec.service}.db"),
            "load_rate": self.setup.load_rate,
            "load_profile": self.setup.load_profile,
            "upstream_profile": self.setup.upstream_profile,
            "app_url": self.url(self.spec.service),
        }
        if self.spec.upstreams:
            values["upstream_url"] = self.url(self.spec.upstreams[0].name)
        for other in self.spec.components:
            values[f"{other.name.replace('-', '_')}_url"] = self.url(other.name)
        if self.database_url is not None:
            values["database_url"] = self.database_url
        if component is not None:
            values["port"] = str(self.ports[component.name])
        return values

    def _cwd(self, cwd: str) -> Path:
        return self.workspace_dir if cwd == WORKSPACE_CWD else self.spec.root / cwd


def fill_template(template: str, values: dict[str, str], where: str) -> str:
    """`template` with its `{placeholders}` filled; `StackSpecError` naming an unknown one."""
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError) as error:
        raise StackSpecError(
            f"component {where!r}: unknown placeholder {error} in {template!r} "
            f"(known: {', '.join(sorted(values))})"
        ) from error
