"""`LocalStack`: one run's stack as local child processes on leased loopback ports."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import psutil

from sreforge_deployer import _lifecycle as lifecycle
from sreforge_deployer._confine import check as check_confinement
from sreforge_deployer._confine import confinement_for
from sreforge_deployer._delivery import baked_patches
from sreforge_deployer._errors import DeployerError, LoadControlError, TeardownIncompleteError
from sreforge_deployer._load import post_load
from sreforge_deployer._memory import remove_run_cgroups
from sreforge_deployer._observability import (
    observability_launches,
    render_run_observability,
    settle_past_windows,
    wait_scraped,
)
from sreforge_deployer._ports import PortAllocator, PortLease, wait_bindable
from sreforge_deployer._process import (
    Component,
    LaunchSpec,
    group_members,
    resolve_binary,
    run_once,
    stop_groups,
)
from sreforge_deployer._render import RenderedObservability
from sreforge_deployer._run import RunIdentity, own_start_time, remove_run_dir
from sreforge_deployer._seed_snapshot import seed_run
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import (
    ComponentSpec,
    ScenarioSetup,
    StackSpec,
    load_scenario_setup,
    load_stack_spec,
)
from sreforge_deployer._topology import StackEndpoints
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS, Wiring
from sreforge_deployer._workspace import Workspace
from sreforge_deployer.local._postgres import POSTGRES, PostgresServer, database_url, run_postgres
from sreforge_deployer.local._state import StackRecord, live_groups
from sreforge_deployer.local._teardown import TeardownReport, leftovers
from sreforge_deployer.local._warden import watch_owner

__all__ = ["LocalStack", "StackEndpoints", "TeardownReport"]

# Sent nowhere: a closed loopback port, for stacks started without a receiver.
_NO_RECEIVER = "http://127.0.0.1:9/"


class LocalStack:
    """A per-run stack: workspace, seed, components, Prometheus and Alertmanager.

    `up()` starts everything health-gated; `arm()` delivers the fault and starts the
    load; `redeploy()` restarts the service from the workspace; `down()` stops every
    process group, removes the run dir and verifies that nothing remains.
    """

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
        self.setup: ScenarioSetup = load_scenario_setup(scenario_dir)
        self.spec: StackSpec = load_stack_spec(self.setup.stack_dir)
        self.time_scale = time_scale
        self.run_id = self.identity.run_id
        self.run_dir = self.identity.run_dir
        self.webhook_route = self.identity.webhook_route
        self.webhook_token = self.identity.webhook_token
        self._leases: dict[str, PortLease] = {}
        self._components: dict[str, Component] = {}
        self._runtime_env: dict[str, str] = {}
        self._groups_seen: dict[str, int] = {}
        self._postgres: PostgresServer | None = None
        self.workspace: Workspace | None = None
        self.rendered: RenderedObservability | None = None
        self.built_commit: str | None = None
        self.base_commit: str | None = None
        self.fault_commit: str | None = None
        self.armed_at: datetime | None = None
        self.teardown_report: TeardownReport | None = None

    def __enter__(self) -> LocalStack:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> StackEndpoints:
        """Build the workspace, seed, start every component health-gated; return endpoints."""
        self._preflight()
        self.identity.make_run_dir()
        try:
            self._lease_ports()
            if self.settings.stacks_die_with_owner:  # before the record that names the owner
                watch_owner(self.settings.runs_root)
            self._record().write()
            self._build_workspace()
            self._seed()
            # Prometheus first: its first scrape comes ~5 s after start (target discovery
            # is throttled), which overlaps with the components' own start-up.
            self._start_observability()
            for component in self.spec.components:
                self._start(self._wiring().launch(component, self._runtime_env))
            self._wait_scraped()
        except BaseException as error:
            with contextlib.suppress(TeardownIncompleteError):
                self._teardown_after(error)
            raise
        return self.endpoints

    def arm(self) -> str:
        """Deliver the fault per DELIVERY_MODE, then start the load; return the base commit."""
        if self.armed_at is not None:
            raise DeployerError(f"run {self.run_id} is already armed")
        workspace = self._require_workspace()
        armed = lifecycle.arm(
            self, self.setup, workspace, self._load_control(), built=self.built_commit
        )
        self.fault_commit, self._runtime_env = armed.fault_commit, armed.runtime_env
        self.base_commit, self.armed_at = armed.base_commit, armed.armed_at
        self._record().write()
        return self.base_commit

    def redeploy(self, *, readiness_gate: bool | None = None) -> float:
        """Restart the service from the workspace's current tree; return seconds taken.

        With the readiness gate on (the scenario's READINESS_GATE unless overridden):
        pause load, restart cold, warm the working set, resume load.
        """
        if self.spec.service not in self._components:
            raise DeployerError(f"no running service {self.spec.service!r} in run {self.run_id}")
        gate = self.setup.readiness_gate if readiness_gate is None else readiness_gate
        load = self._load_control()
        return lifecycle.redeploy(self, load, self._runtime_env, readiness_gate=gate)

    def stop_processes(self) -> None:
        """Stop every process group (TERM, KILL after the teardown grace), keep the run dir.

        For a run whose verdict is in: `down()` still removes the dir and verifies.
        """
        settings = self.settings
        pgids = list({**self._groups_seen, **self.pgids()}.values())
        stop_groups(
            pgids,
            settings.stop_timeout_seconds,
            term_grace_seconds=settings.teardown_grace_seconds,
        )
        remove_run_cgroups(self.run_id)

    def down(self) -> TeardownReport:
        """Stop every process group, remove the run dir, verify nothing is left.

        SIGTERM first, SIGKILL after `teardown_grace_seconds` (nothing of the run is
        kept, so no drain is owed). Raises `TeardownIncompleteError` listing what
        survived. Safe to call twice.
        """
        groups = {name: c.pgid for name, c in self._components.items() if c.pgid is not None}
        groups = {**self._groups_seen, **groups}
        remaining = self._postgres.stop() if self._postgres is not None else []
        self._postgres = None
        timeout = self.settings.stop_timeout_seconds
        grace = self.settings.teardown_grace_seconds
        stop_groups(list(groups.values()), timeout, term_grace_seconds=grace)
        for component in self._components.values():
            if component.process is not None:
                with contextlib.suppress(Exception):
                    component.process.wait(timeout=timeout)
        # Only ports of components we started: a port someone else took before its
        # component could bind it is theirs, not a leftover of ours.
        ports = {name: lease.port for name, lease in self._leases.items() if name in groups}
        remaining += leftovers(groups, ports, None)
        remaining += [f"memory cgroup {path}" for path in remove_run_cgroups(self.run_id)]
        remove_run_dir(self.run_dir)
        remaining += leftovers({}, {}, self.run_dir)
        for lease in self._leases.values():
            lease.release()
        self._components.clear()
        self._leases.clear()
        self._groups_seen.clear()
        self.teardown_report = TeardownReport(groups, ports, self.run_dir, remaining)
        if remaining:
            raise TeardownIncompleteError(self.run_id, remaining)
        return self.teardown_report

    def start_load(self) -> datetime:
        """Warm the service's working set, let the warm-up age out of the rules, resume
        the load (`lifecycle.start_load`); when it resumed."""
        load = self._load_control()
        if load is None:
            raise LoadControlError(f"run {self.run_id}: the stack has no load generator")
        return lifecycle.start_load(self, load)

    def post_load(self, path: str, timeout: float = 5.0) -> None:
        """POST `path` on the run's load generator (`LoadControlError` unless 2xx)."""
        post_load(f"{self.url(self._require_load().name)}{path}", timeout)

    def settle(self, since: float) -> None:
        """Wait until the rule windows requests feed have moved past `since`."""
        if self.rendered is not None and PROMETHEUS in self._components:
            job = self.spec.component(self.spec.service).job or self.spec.service
            settle_past_windows(self.url(PROMETHEUS), self.rendered, job, since)

    def restart_service(self, runtime_env: Mapping[str, str]) -> None:
        """Restart the service with `runtime_env`, kept for every later restart."""
        self._runtime_env = dict(runtime_env)
        self._restart(self.spec.service)

    @property
    def ports(self) -> dict[str, int]:
        """Leased port per component (including prometheus and alertmanager)."""
        return {name: lease.port for name, lease in self._leases.items()}

    def url(self, component: str) -> str:
        """`http://127.0.0.1:<port>` of a component."""
        return f"http://127.0.0.1:{self.ports[component]}"

    @property
    def webhook_url(self) -> str | None:
        """The per-run opaque route Alertmanager posts to (None without a receiver)."""
        return self.identity.webhook_url

    @property
    def endpoints(self) -> StackEndpoints:
        """Agent view (Prometheus, Alertmanager, the service) and operator view (all)."""
        agent = {
            PROMETHEUS: self.url(PROMETHEUS),
            ALERTMANAGER: self.url(ALERTMANAGER),
            self.spec.service: self.url(self.spec.service),
        }
        operator = {**agent, **{name: self.url(name) for name in self._leases if name != POSTGRES}}
        return StackEndpoints(agent=agent, operator=operator)

    def pgids(self) -> dict[str, int]:
        """Process group id of each running component."""
        return {name: c.pgid for name, c in self._components.items() if c.pgid is not None}

    def processes(self) -> list[psutil.Process]:
        """Every live process of the stack (all members of all its groups)."""
        return [proc for procs in self.component_processes().values() for proc in procs]

    def component_processes(self) -> dict[str, list[psutil.Process]]:
        """Each running component's live processes (every member of its group)."""
        return {name: group_members(pgid) for name, pgid in self.pgids().items()}

    def _wiring(self) -> Wiring:
        # From the lease, not the server object: an adopted stack has only the former.
        url = database_url(self.ports[POSTGRES]) if POSTGRES in self._leases else None
        return Wiring(
            self.spec, self.setup, self.settings, self.run_dir, self.ports, self.time_scale, url
        )

    def _preflight(self) -> None:
        # The service runs the agent's code: no jail here, no stack at all.
        check_confinement(confinement_for(self.settings.bwrap_path))
        env = self._wiring().base_env()
        resolve_binary(PROMETHEUS, self.settings.prometheus_bin, env)
        resolve_binary(ALERTMANAGER, self.settings.alertmanager_bin, env)
        resolve_binary("python", self.settings.python, env)
        if self.setup.database == "postgres":
            run_postgres(self.spec, self.setup, self.settings, self.run_dir, port=0)

    def _lease_ports(self) -> None:
        names = [c.name for c in self.spec.components] + [ALERTMANAGER, PROMETHEUS]
        names += [POSTGRES] if self.setup.database == "postgres" else []
        allocator = PortAllocator(
            self.settings.port_lock_dir, self.settings.port_range_low, self.settings.port_range_high
        )
        self._leases = dict(zip(names, allocator.lease(len(names)), strict=True))

    def _build_workspace(self) -> None:
        source = self.spec.root / self.spec.workspace_source
        dest = self._wiring().workspace_dir
        self.workspace = Workspace.build(source, dest, baked_patches=baked_patches(self.setup))
        self.base_commit = self.built_commit = self.workspace.head()

    def _seed(self) -> None:
        self.identity.layout.data.mkdir(exist_ok=True)
        assert self.workspace is not None
        seed_run(self._wiring(), self.workspace)  # on the host, before any agent code exists
        if self.setup.database == "postgres":
            port = self.ports[POSTGRES]
            self._postgres = run_postgres(self.spec, self.setup, self.settings, self.run_dir, port)
            self._groups_seen[POSTGRES] = self._postgres.start()
            self._record().write()
            seed = self._wiring().postgres_seed_launch()
            assert seed is not None
            run_once(seed)

    def _start(self, launch: LaunchSpec) -> None:
        component = Component(launch)
        self._components[launch.name] = component
        component.start()
        assert component.process is not None
        self._groups_seen[launch.name] = component.process.pid
        self._record().write()
        component.wait_healthy()

    def _restart(self, name: str) -> None:
        old = self._components[name]
        survivors = old.stop(self._stop_timeout(name))
        if survivors:
            raise DeployerError(f"component {name!r}: pids {survivors} survived SIGKILL")
        if old.spec.port is not None:  # a loaded machine can take a while to free it
            wait_bindable(old.spec.port, self._stop_timeout(name))
        if name in (PROMETHEUS, ALERTMANAGER):
            self._start(old.spec)
        else:
            self._start(self._wiring().launch(self.spec.component(name), self._runtime_env))

    def _stop_timeout(self, name: str) -> float:
        found = (c.stop_timeout_seconds for c in self.spec.components if c.name == name)
        return next(found, self.settings.stop_timeout_seconds)

    def _start_observability(self) -> None:
        obs, wiring = self.identity.layout.observability, self._wiring()
        templates = self.spec.root / self.spec.observability
        receiver = self.webhook_url or _NO_RECEIVER
        self.rendered = render_run_observability(
            templates, obs, wiring, self.webhook_token, receiver, self.time_scale
        )
        for launch in observability_launches(self.settings, self.rendered, wiring, obs):
            self._start(launch)

    def _wait_scraped(self) -> None:
        jobs = {c.job for c in self.spec.components if c.job}
        log = self.identity.layout.logs / f"{PROMETHEUS}.log"
        wait_scraped(self.url(PROMETHEUS), jobs, self.settings.scrape_timeout_seconds, log)

    def _record(self) -> StackRecord:
        known = {name: self.url(name) for name in self._leases if name != POSTGRES}
        return StackRecord(
            run_id=self.run_id,
            scenario_id=self.setup.scenario_id,
            run_dir=self.run_dir,
            owner_pid=os.getpid(),
            owner_started_at=own_start_time(),
            time_scale=self.time_scale,
            port_lock_dir=self.settings.port_lock_dir,
            ports=self.ports,
            groups=live_groups(self._groups_seen),
            agent_endpoints={k: v for k, v in known.items() if k in self._agent_names()},
            operator_endpoints=known,
            built_commit=self.built_commit,
            base_commit=self.base_commit if self.armed_at else None,
            fault_commit=self.fault_commit,
            armed_at=self.armed_at,
            engine_home=self.settings.engine_home,
            dies_with_owner=self.settings.stacks_die_with_owner,
        )

    def _agent_names(self) -> set[str]:
        return {PROMETHEUS, ALERTMANAGER, self.spec.service}

    def _require_workspace(self) -> Workspace:
        if self.workspace is None:
            raise DeployerError(f"run {self.run_id} has no workspace yet: call up() first")
        return self.workspace

    def _require_load(self) -> ComponentSpec:
        load = self.spec.load
        if load is None or load.name not in self._components:
            raise LoadControlError(f"run {self.run_id}: no running load generator")
        return load

    def _load_control(self) -> lifecycle.LoadControl | None:
        return lifecycle.LoadControl.of(self.spec.load)

    def _teardown_after(self, error: BaseException) -> None:
        try:
            self.down()
        except TeardownIncompleteError as incomplete:
            error.add_note(str(incomplete))
            raise
