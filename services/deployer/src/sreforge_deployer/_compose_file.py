"""One run's stack as a Compose document: pure, run description in, YAML-able dict out.

Every component of `stack.toml`, Prometheus and Alertmanager becomes a service of
the run's project, reached by its name on a fixed port (`COMPONENT_PORT`, 9090, 9093)
on the networks `_compose_networks` gives it (the service only beside what it
`reaches`), and by the operator on a leased port the gateway publishes on 127.0.0.1.
Bind mounts keep their host paths (as the bubblewrap jail does), so the rendered
configs, the SQLite path and the workspace read the same inside and out. The service
runs the agent's code: it sees only its workspace (read-only) and the run's `data/`,
with a read-only root, no capabilities and no new privileges.
Alertmanager reaches the host's trigger through `webhook-relay`, a stdlib TCP relay
on the host's network listening on the Docker bridge's gateway address only (an
internal network still routes to the host's own addresses, never beyond it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sreforge_deployer._compose_image import RELAY, STACK_PYTHON
from sreforge_deployer._compose_networks import (
    GATEWAY,
    gateway_networks,
    gateway_specs,
    network_definitions,
    networks_of,
)
from sreforge_deployer._observability import alertmanager_launch, prometheus_launch
from sreforge_deployer._render import RenderedObservability
from sreforge_deployer._spec import (
    WORKSPACE_CWD,
    ComponentSpec,
    ScenarioSetup,
    StackSpec,
    memory_limit_mb,
)
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS, fill_template

__all__ = [
    "COMPONENT_PORT",
    "RELAY_SERVICE",
    "ComposeRun",
    "WebhookRelay",
    "compose_document",
    "internal_port",
    "network_url",
    "template_values",
]

COMPONENT_PORT = 8080
RELAY_SERVICE = "webhook-relay"
HOST_ALIAS = "host.docker.internal"
_PORTS = {PROMETHEUS: 9090, ALERTMANAGER: 9093}
_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"}


@dataclass(frozen=True)
class WebhookRelay:
    """Alertmanager → `listen_host:listen_port` (the bridge gateway) → the trigger."""

    listen_host: str
    listen_port: int
    target_host: str
    target_port: int


@dataclass(frozen=True)
class ComposeRun:
    """Everything that decides a run's compose document."""

    project: str
    image: str
    spec: StackSpec
    setup: ScenarioSetup
    run_dir: Path
    host_ports: dict[str, int]
    time_scale: float
    user: str
    rendered: RenderedObservability
    relay: WebhookRelay | None = None
    runtime_env: dict[str, str] = field(default_factory=dict)
    go_env: dict[str, str] = field(default_factory=dict)

    @property
    def workspace_dir(self) -> Path:
        """The run's git workspace (mounted read-only into the service)."""
        return self.run_dir / "workspace"

    @property
    def data_dir(self) -> Path:
        """The run's data: the one folder the service may write."""
        return self.run_dir / "data"

    @property
    def obs_dir(self) -> Path:
        """The rendered Prometheus/Alertmanager configs and their data."""
        return self.run_dir / "observability"


def internal_port(name: str) -> int:
    """The port `name` listens on inside the run's network."""
    return _PORTS.get(name, COMPONENT_PORT)


def network_url(name: str) -> str:
    """`http://<name>:<port>`: how the stack's own containers reach `name`."""
    return f"http://{name}:{internal_port(name)}"


def template_values(spec: StackSpec, webhook_url: str, token_file: Path) -> dict[str, str]:
    """The observability templates' targets as in-network `name:port`."""
    values = {
        "alertmanager_target": f"{ALERTMANAGER}:{internal_port(ALERTMANAGER)}",
        "app_target": f"{spec.service}:{COMPONENT_PORT}",
        "webhook_url": webhook_url,
        "webhook_token_file": str(token_file),
    }
    if spec.upstreams:
        values["upstream_target"] = f"{spec.upstreams[0].name}:{COMPONENT_PORT}"
    if spec.load is not None:
        values["loadgen_target"] = f"{spec.load.name}:{COMPONENT_PORT}"
    for component in spec.components:
        values[f"{component.name.replace('-', '_')}_target"] = f"{component.name}:{COMPONENT_PORT}"
    return values


def compose_document(run: ComposeRun) -> dict[str, Any]:
    """The run's compose document (`docker compose -p <project> -f - up`)."""
    services: dict[str, Any] = {
        ALERTMANAGER: _alertmanager(run),
        PROMETHEUS: _prometheus(run),
    }
    for component in run.spec.components:
        services[component.name] = _component(run, component)
    services[GATEWAY] = _gateway(run, [*services])
    if run.relay is not None:
        services[RELAY_SERVICE] = _relay(run, run.relay)
    return {"name": run.project, "services": services, "networks": network_definitions()}


def _base(run: ComposeRun, name: str) -> dict[str, Any]:
    return {
        "image": run.image,
        "init": True,
        "user": run.user,
        "hostname": name,
        "networks": networks_of(run.spec, name),
    }


def _gateway(run: ComposeRun, names: list[str]) -> dict[str, Any]:
    """Harness code: the only container on `edge`, it publishes every leased port."""
    published = {name: run.host_ports[name] for name in names}
    specs = gateway_specs(run.spec, published, {name: internal_port(name) for name in names})
    return {
        "image": run.image,
        "init": True,
        "user": run.user,
        "hostname": GATEWAY,
        "networks": gateway_networks(run.spec),
        "ports": [f"127.0.0.1:{port}:{port}" for port in published.values()],
        "command": ["/usr/bin/python3", "-I", "-S", RELAY, *specs, "--", "sleep", "infinity"],
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
    }


def _component(run: ComposeRun, component: ComponentSpec) -> dict[str, Any]:
    values = _placeholders(run)
    argv = [fill_template(arg, values, component.name) for arg in component.argv]
    if component.is_load:
        argv.append("--paused")  # load begins when the run says so, never at boot
    env = {
        **_ENV,
        **{
            key: fill_template(value, values, component.name)
            for key, value in component.env.items()
        },
        **{key: f"{real * run.time_scale:g}" for key, real in component.scaled_env.items()},
    }
    is_service = component.name == run.spec.service
    if is_service:
        env.update(run.runtime_env)
    cwd = run.workspace_dir if component.cwd == WORKSPACE_CWD else run.spec.root / component.cwd
    service = {
        **_base(run, component.name),
        "working_dir": str(cwd),
        "command": argv,
        "environment": env,
        "stop_grace_period": f"{component.stop_timeout_seconds:g}s",
    }
    limit_mb = memory_limit_mb(run.spec, run.setup, component)
    if limit_mb is not None:  # the container's cgroup; no swap to grow into past it
        service.update(mem_limit=f"{limit_mb}m", memswap_limit=f"{limit_mb}m")
    if is_service:
        service["volumes"] = [f"{run.workspace_dir}:{run.workspace_dir}:ro", _rw(run.data_dir)]
        service.update(
            read_only=True,
            tmpfs=["/tmp"],
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
        )
    else:  # harness code: the stack's own folder read-only, the seeded library
        service["volumes"] = [f"{run.spec.root}:{run.spec.root}:ro", _rw(run.data_dir)]
    return service


def _placeholders(run: ComposeRun) -> dict[str, str]:
    spec = run.spec
    values = {
        "python": STACK_PYTHON,
        "host": "0.0.0.0",
        "port": str(COMPONENT_PORT),
        "db_path": str(run.data_dir / f"{spec.service}.db"),
        "load_rate": run.setup.load_rate,
        "load_profile": run.setup.load_profile,
        "upstream_profile": run.setup.upstream_profile,
        "app_url": network_url(spec.service),
    }
    if spec.upstreams:
        values["upstream_url"] = network_url(spec.upstreams[0].name)
    for other in spec.components:
        values[f"{other.name.replace('-', '_')}_url"] = network_url(other.name)
    return values


def _prometheus(run: ComposeRun) -> dict[str, Any]:
    launch = prometheus_launch(
        "prometheus",
        run.rendered,
        internal_port(PROMETHEUS),
        run.obs_dir / PROMETHEUS,
        run.run_dir / "logs",
        env={},
        time_scale=run.time_scale,
        timeout_seconds=30.0,
        host="0.0.0.0",
    )
    return _observability(run, PROMETHEUS, launch.argv)


def _alertmanager(run: ComposeRun) -> dict[str, Any]:
    launch = alertmanager_launch(
        "prometheus-alertmanager",
        run.rendered,
        internal_port(ALERTMANAGER),
        run.obs_dir / ALERTMANAGER,
        run.run_dir / "logs",
        env={},
        timeout_seconds=30.0,
        host="0.0.0.0",
    )
    service = _observability(run, ALERTMANAGER, launch.argv)
    if run.relay is not None:
        service["extra_hosts"] = [f"{HOST_ALIAS}:host-gateway"]
    return service


def _observability(run: ComposeRun, name: str, argv: list[str]) -> dict[str, Any]:
    return {
        **_base(run, name),
        "working_dir": str(run.obs_dir / name),
        "command": argv,
        "environment": {**_ENV, **run.go_env},
        "volumes": [_rw(run.obs_dir)],
    }


def _relay(run: ComposeRun, relay: WebhookRelay) -> dict[str, Any]:
    listen = f"tcp:{relay.listen_host}:{relay.listen_port}"
    target = f"tcp:{relay.target_host}:{relay.target_port}"
    return {
        "image": run.image,
        "init": True,
        "user": run.user,
        "network_mode": "host",
        "command": [
            *("/usr/bin/python3", "-I", "-S", RELAY, f"{listen}={target}"),
            *("--", "sleep", "infinity"),
        ],
    }


def _rw(path: Path) -> str:
    return f"{path}:{path}"
