"""`ComposeStack`: one run's stack as a Docker Compose project (`sreforge-run-<hash>`).

The workspace, the seed, the fault's delivery and the observability configs are the
local topology's own code (`_workspace`, `_delivery`, `_render`, the seed's launch
from `_wiring`); only where components run differs: containers of the stack image
on the run's network, each published on a leased loopback port. The state file
`compose.json` in the run dir lets any process find and remove the project.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml
from sreforge_prom import shared_tls_context

from sreforge_deployer import _lifecycle as lifecycle
from sreforge_deployer._compose_file import (
    RELAY_SERVICE,
    ComposeRun,
    WebhookRelay,
    compose_document,
    network_url,
    template_values,
)
from sreforge_deployer._compose_image import StackImage
from sreforge_deployer._compose_networks import AGENT_NETWORK
from sreforge_deployer._compose_project import ComposeProject, bridge_gateway, project_name
from sreforge_deployer._compose_state import ComposeRecord
from sreforge_deployer._delivery import baked_patches
from sreforge_deployer._errors import ComponentStartError, DeployerError, LoadControlError
from sreforge_deployer._load import post_load
from sreforge_deployer._observability import go_runtime_env, settle_past_windows, wait_scraped
from sreforge_deployer._ports import PortAllocator, PortLease
from sreforge_deployer._render import RenderedObservability, render_observability
from sreforge_deployer._run import RunIdentity, own_start_time, remove_run_dir
from sreforge_deployer._seed_snapshot import seed_run
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import (
    load_scenario_setup,
    load_stack_spec,
    refuse_postgres,
)
from sreforge_deployer._topology import StackEndpoints
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS, Wiring
from sreforge_deployer._workspace import Workspace

__all__ = ["ComposeStack"]

_NO_RECEIVER = "http://127.0.0.1:9/"  # inside Alertmanager's container: nothing there
_OBSERVABILITY = (ALERTMANAGER, PROMETHEUS)


class ComposeStack:
    """A per-run stack as a Compose project: `up`, `arm`, `redeploy`, `down` (verified)."""

    def __init__(
        self,
        scenario_dir: Path,
        *,
        time_scale: float = 1.0,
        run_id: str | None = None,
        webhook_url: str | None = None,
        webhook_route: str | None = None,
        webhook_token_file: Path | None = None,
        settings: DeployerSettings | None = None,
    ) -> None:
        self.settings = settings or DeployerSettings()
        self.identity = RunIdentity.describe(
            self.settings,
            time_scale=time_scale,
            run_id=run_id,
            webhook_url=webhook_url,
            webhook_route=webhook_route,
            webhook_token_file=webhook_token_file,
        )
        self.setup = load_scenario_setup(scenario_dir)
        refuse_postgres(self.setup, "the compose topology")
        self.spec = load_stack_spec(self.setup.stack_dir)
        self.time_scale = time_scale
        self.run_id = self.identity.run_id
        self.run_dir = self.identity.run_dir
        self.project = ComposeProject(project_name(self.run_id), self.run_dir / "compose.yaml")
        self.webhook_route = self.identity.webhook_route
        self.webhook_token = self.identity.webhook_token
        self._webhook_base = webhook_url
        self._leases: dict[str, PortLease] = {}
        self._relay_lease: PortLease | None = None
        self._runtime_env: dict[str, str] = {}
        self._image = ""
        self._relay: WebhookRelay | None = None
        self.workspace: Workspace | None = None
        self.rendered: RenderedObservability | None = None
        self.base_commit: str | None = None
        self.fault_commit: str | None = None
        self.armed_at: datetime | None = None

    def up(self) -> StackEndpoints:
        """Workspace, seed, image, then every container, health-gated and scraped."""
        self.identity.make_run_dir()
        try:
            self._lease_ports()
            self._record().write()
            self._build_workspace()
            self._seed()
            self._image = self.stack_image().ensure()
            self._render_observability()
            self._write_compose_file()
            self.project.up()
            for name in (*_OBSERVABILITY, *(c.name for c in self.spec.components)):
                self._wait_healthy(name)
            jobs = {c.job for c in self.spec.components if c.job}
            log = self.identity.layout.logs / f"{PROMETHEUS}.log"
            wait_scraped(self.url(PROMETHEUS), jobs, self.settings.scrape_timeout_seconds, log)
            self._record(booted=True).write()  # adoptable from here on
        except BaseException as error:
            leftovers = self.down()
            if leftovers:
                error.add_note(f"left after the failed start: {'; '.join(leftovers)}")
            raise
        return self.endpoints

    def arm(self) -> str:
        """Deliver the fault and start the load (`lifecycle.arm`, as the local topology)."""
        if self.armed_at is not None:
            raise DeployerError(f"run {self.run_id} is already armed")
        workspace = self._require_workspace()
        armed = lifecycle.arm(self, self.setup, workspace, self._load_control())
        self.fault_commit, self._runtime_env = armed.fault_commit, armed.runtime_env
        self.base_commit, self.armed_at = armed.base_commit, armed.armed_at
        self._record(booted=True).write()
        return self.base_commit

    def redeploy(self, *, readiness_gate: bool | None = None) -> float:
        """Recreate the service's container from the workspace's tree; seconds taken."""
        gate = self.setup.readiness_gate if readiness_gate is None else readiness_gate
        load = self._load_control()
        return lifecycle.redeploy(self, load, self._runtime_env, readiness_gate=gate)

    def start_load(self) -> datetime:
        """Warm up, let the warm-up age out of every rule window, resume; when resumed."""
        load = self._load_control()
        if load is None:
            raise LoadControlError(f"run {self.run_id}: the stack has no load generator")
        return lifecycle.start_load(self, load)

    def post_load(self, path: str, timeout: float = 5.0) -> None:
        """POST `path` on the run's load generator (`LoadControlError` unless 2xx)."""
        if self.spec.load is None:
            raise LoadControlError(f"run {self.run_id}: the stack has no load generator")
        post_load(f"{self.url(self.spec.load.name)}{path}", timeout)

    def settle(self, since: float) -> None:
        """Wait until the rule windows requests feed have moved past `since`."""
        if self.rendered is not None:
            job = self.spec.component(self.spec.service).job or self.spec.service
            settle_past_windows(self.url(PROMETHEUS), self.rendered, job, since)

    def restart_service(self, runtime_env: Mapping[str, str]) -> None:
        """Recreate the service's container with `runtime_env`, kept for later ones."""
        self._runtime_env = dict(runtime_env)
        self._write_compose_file()
        self.project.up((self.spec.service,), recreate=True)
        self._wait_healthy(self.spec.service)

    def stop_processes(self) -> None:
        """Stop every container of the project (the run dir and the project stay)."""
        with contextlib.suppress(DeployerError):
            self.project.stop(self.settings.teardown_grace_seconds)

    def down(self) -> list[str]:
        """`compose down -v --remove-orphans`, remove the run dir, verify; what is left."""
        remaining = down_project(self.project, self.settings.teardown_grace_seconds)
        remove_run_dir(self.run_dir)
        if self.run_dir.exists():
            remaining.append(f"run directory {self.run_dir}")
        for lease in [*self._leases.values(), *filter(None, [self._relay_lease])]:
            lease.release()
        self._leases.clear()
        self._relay_lease = None
        return remaining

    def url(self, name: str) -> str:
        """`http://127.0.0.1:<published port>` of a component."""
        return f"http://127.0.0.1:{self._leases[name].port}"

    @property
    def endpoints(self) -> StackEndpoints:
        """Agent view (host-side agents: the published URLs) and operator view (all)."""
        names = [PROMETHEUS, ALERTMANAGER, self.spec.service]
        agent = {name: self.url(name) for name in names}
        operator = {**agent, **{name: self.url(name) for name in self._leases}}
        return StackEndpoints(agent=agent, operator=operator)

    @property
    def agent_network(self) -> str:
        """The Docker network an in-box agent session joins (`<project>_agent`): there it
        reaches `network_endpoints` by name and nothing else of the run."""
        return f"{self.project.name}_{AGENT_NETWORK}"

    @property
    def network_endpoints(self) -> dict[str, str]:
        """The agent's view from inside the run's network (`http://prometheus:9090`)."""
        names = [PROMETHEUS, ALERTMANAGER, self.spec.service]
        return {name: network_url(name) for name in names}

    def _ports(self) -> dict[str, int]:
        ports = {name: lease.port for name, lease in self._leases.items()}
        if self._relay_lease is not None:
            ports[RELAY_SERVICE] = self._relay_lease.port
        return ports

    def _wiring(self) -> Wiring:
        ports = {name: lease.port for name, lease in self._leases.items()}
        return Wiring(self.spec, self.setup, self.settings, self.run_dir, ports, self.time_scale)

    def _lease_ports(self) -> None:
        names = [c.name for c in self.spec.components] + [ALERTMANAGER, PROMETHEUS]
        relay = self._webhook_target()
        settings = self.settings
        allocator = PortAllocator(
            settings.port_lock_dir, settings.port_range_low, settings.port_range_high
        )
        leases = allocator.lease(len(names) + (relay is not None))
        self._leases = dict(zip(names, leases, strict=False))
        if relay is not None:
            self._relay_lease = leases[-1]
            self._relay = WebhookRelay(bridge_gateway(), leases[-1].port, *relay)

    def _webhook_target(self) -> tuple[str, int] | None:
        if self._webhook_base is None:
            return None
        parts = urlsplit(self._webhook_base)
        if parts.scheme != "http" or parts.hostname is None:
            raise DeployerError(f"webhook base {self._webhook_base!r}: expected http://host:port")
        return parts.hostname, parts.port or 80

    def _build_workspace(self) -> None:
        source = self.spec.root / self.spec.workspace_source
        dest = self._wiring().workspace_dir
        self.workspace = Workspace.build(source, dest, baked_patches=baked_patches(self.setup))
        self.base_commit = self.workspace.head()

    def _seed(self) -> None:
        self.identity.layout.data.mkdir(exist_ok=True)
        assert self.workspace is not None
        seed_run(self._wiring(), self.workspace)  # on the host, before any agent code exists

    def stack_image(self) -> StackImage:
        """The stack image this run uses (built by `up()` when the engine lacks it)."""
        settings = self.settings
        binaries = {
            "prometheus": settings.prometheus_bin,
            "prometheus-alertmanager": settings.alertmanager_bin,
        }
        # The build lock sits beside the port leases: the one machine-wide lock dir.
        return StackImage(self.spec.root, settings.compose_wheels, binaries, settings.port_lock_dir)

    def _render_observability(self) -> None:
        obs = self.identity.layout.observability
        for name in _OBSERVABILITY:
            (obs / name).mkdir(parents=True)
        token_file = obs / "webhook.token"
        token_file.write_text(self.webhook_token)
        token_file.chmod(0o600)
        receiver = _NO_RECEIVER
        if self._relay is not None:
            path = urlsplit(self._webhook_base or "").path.rstrip("/")
            receiver = (
                f"http://host.docker.internal:{self._relay.listen_port}{path}/{self.webhook_route}"
            )
        values = template_values(self.spec, receiver, token_file)
        templates = self.spec.root / self.spec.observability
        self.rendered = render_observability(templates, obs, values, self.time_scale)

    def _write_compose_file(self) -> None:
        assert self.rendered is not None
        run = ComposeRun(
            project=self.project.name,
            image=self._image,
            spec=self.spec,
            setup=self.setup,
            run_dir=self.run_dir,
            host_ports=self._ports(),
            time_scale=self.time_scale,
            user=f"{os.getuid()}:{os.getgid()}",
            rendered=self.rendered,
            relay=self._relay,
            runtime_env=self._runtime_env,
            go_env=go_runtime_env(self.settings),
        )
        text = yaml.safe_dump(compose_document(run), sort_keys=False, width=1000)
        assert self.project.file is not None
        self.project.file.write_text(text)

    def _wait_healthy(self, name: str) -> None:
        component = next((c for c in self.spec.components if c.name == name), None)
        path = component.health if component is not None else "/-/ready"
        if path is None:
            return
        timeout = (
            component.startup_timeout_seconds
            if component is not None
            else self.settings.observability_timeout_seconds
        )
        url, deadline = f"{self.url(name)}{path}", time.monotonic() + timeout
        with httpx.Client(timeout=2.0, trust_env=False, verify=shared_tls_context()) as client:
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return
                time.sleep(0.2)
        log = self.identity.layout.logs / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        tail = self.project.logs(name)
        log.write_text(tail)
        raise ComponentStartError(
            name, f"{url} not healthy within {timeout:g}s", log_path=log, log_tail=tail
        )

    def _record(self, *, booted: bool = False) -> ComposeRecord:
        return ComposeRecord(
            run_id=self.run_id,
            project=self.project.name,
            run_dir=self.run_dir,
            owner_pid=os.getpid(),
            owner_started_at=own_start_time(),
            port_lock_dir=self.settings.port_lock_dir,
            ports=self._ports(),
            engine_home=self.settings.engine_home,
            scenario_id=self.setup.scenario_id,
            time_scale=self.time_scale,
            webhook_route=self.webhook_route,
            image=self._image,
            booted=booted,
            base_commit=self.base_commit,
            fault_commit=self.fault_commit,
            armed_at=self.armed_at,
        )

    def _require_workspace(self) -> Workspace:
        if self.workspace is None:
            raise DeployerError(f"run {self.run_id} has no workspace yet: call up() first")
        return self.workspace

    def _load_control(self) -> lifecycle.LoadControl | None:
        return lifecycle.LoadControl.of(self.spec.load)


def down_project(project: ComposeProject, grace_seconds: float) -> list[str]:
    """Remove the project and verify by its label: what is left (empty when clean)."""
    problems = []
    try:
        project.down(grace_seconds)
    except DeployerError as error:
        problems.append(str(error))
    try:
        return [*project.leftovers(), *problems]
    except DeployerError as error:
        return [*problems, f"could not list what is left of {project.name}: {error}"]
