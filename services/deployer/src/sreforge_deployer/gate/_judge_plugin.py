"""The judge process's pytest plugin: fixtures serving the submitted tree to hidden tests.

Loaded by `_judge` with `-p`; reads its `JudgeSpec` from `SREFORGE_JUDGE_SPEC`. The
stack's seed runs once per set, confined, on the submitted tree; each test gets a fresh
copy of that data and a fresh service, started as a run starts it (the stack's argv and
env, the service's jail) with two differences: every component it reaches is the
`upstream` stub of this process (the test says how it answers), and the scenario's
runtime override is not set (CI tests the code, as it always did; the override is the
oracle's to judge live). The fixtures:

- `service`: an `httpx.Client` on the started service, its answers capped in size (the
  service is the agent's code, and so is every byte it answers);
- `serve(env=None, data="seeded")`: the same, started on demand with extra env, on fresh
  seeded data, an empty folder or the data kept from the last start
  (`ComponentStartError` when it does not come up), and
  `serve.refuses(env)`: whether it fails to come up with that env;
- `upstream`: the stub (`upstream.handler`, `httpx.Request` → `httpx.Response`; 404 by
  default), reset for each test;
- `service_db`: the path of the service's data file (`{db_path}`), to read after requests.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import httpx
import pytest
from sreforge_prom import shared_tls_context

from sreforge_deployer._errors import ComponentStartError
from sreforge_deployer._ports import PortAllocator, PortLease, wait_bindable
from sreforge_deployer._process import Component, log_tail, run_once
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec, refuse_postgres
from sreforge_deployer._wiring import Wiring
from sreforge_deployer.gate._judge import SPEC_ENV, JudgeSpec
from sreforge_deployer.gate._judge_stub import StubUpstream

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Data",
    "JudgedService",
    "Serve",
    "serve",
    "service",
    "service_db",
    "upstream",
]

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""A bigger answer fails the test that asked (the judge's memory is not the agent's)."""
_TIMEOUT_S = 10.0
_STOP_S = 5.0


class _CappedTransport(httpx.BaseTransport):
    """Reads each response body up to `MAX_RESPONSE_BYTES`, then refuses it."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport(retries=0, verify=shared_tls_context())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        body = bytearray()
        try:
            # Decoded as it arrives, so a compressed answer is capped at its real size.
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_RESPONSE_BYTES:
                    raise httpx.DecodingError(
                        f"the service answered over {MAX_RESPONSE_BYTES} bytes", request=request
                    )
        finally:
            response.close()
        headers = [(k, v) for k, v in response.headers.multi_items() if k != "content-encoding"]
        return httpx.Response(
            response.status_code, headers=headers, content=bytes(body), request=request
        )

    def close(self) -> None:
        self._inner.close()


Data = Literal["seeded", "empty", "kept"]
"""What a start's data folder holds."""


class JudgedService:
    """The set's submitted service: seeded once, started fresh for each test."""

    def __init__(self, spec: JudgeSpec, stub_port: int) -> None:
        self.spec = spec
        setup = load_scenario_setup(spec.scenario_dir)
        # Hidden tests would meet the service on SQLite: refused, not half-judged.
        refuse_postgres(setup, "the CI gate's judge (hidden tests)")
        stack = load_stack_spec(setup.stack_dir)
        # Its dependencies are the stub (their ports are the stub's); no egress.
        self._component = stack.component(stack.service).model_copy(update={"egress": []})
        allocator = PortAllocator(spec.port_lock_dir, spec.port_range_low, spec.port_range_high)
        self._lease: PortLease = allocator.lease(1)[0]
        ports = {component.name: stub_port for component in stack.components}
        ports[stack.service] = self._lease.port
        settings = DeployerSettings(
            python=spec.python,
            bwrap_path=spec.bwrap_path,
            port_lock_dir=spec.port_lock_dir,
            use_cases=setup.directory.parent.parent.parent,
        )
        self.wiring = Wiring(stack, setup, settings, spec.run_dir, ports, 1.0)
        self._seeded = spec.run_dir / "seeded"
        self._running: Component | None = None

    @property
    def url(self) -> str:
        """The service's loopback address on the host."""
        return self.wiring.url(self._component.name)

    @property
    def db_path(self) -> Path:
        """The service's data file (the stack's `{db_path}`)."""
        return self.wiring.data_dir / f"{self._component.name}.db"

    def seed(self) -> None:
        """Run the stack's seed on the submitted tree, confined; keep what it wrote."""
        self.wiring.data_dir.mkdir(parents=True, exist_ok=True)
        launch = self.wiring.seed_launch(confined=True)
        if launch is not None:
            run_once(launch)
        shutil.copytree(self.wiring.data_dir, self._seeded, symlinks=True, ignore=_special)

    def start(self, env: dict[str, str] | None = None, *, data: Data = "seeded") -> None:
        """Stop the running service, if any; start it again on `data`, health-gated."""
        self.stop()
        folder = self.wiring.data_dir
        if data != "kept":
            shutil.rmtree(folder, ignore_errors=True)
        if data == "seeded":
            shutil.copytree(self._seeded, folder, symlinks=True)
        folder.mkdir(exist_ok=True)
        wait_bindable(self._lease.port, _STOP_S)
        component = Component(self.wiring.launch(self._component, dict(env or {})))
        component.start()
        assert component.pgid is not None
        with self.spec.pgid_file.open("a") as listed:
            listed.write(f"{component.pgid}\n")
        self._running = component
        component.wait_healthy()

    def stop(self) -> None:
        """Stop the running service (its whole group)."""
        if self._running is not None:
            self._running.stop(_STOP_S)
            self._running = None

    def client(self) -> httpx.Client:
        """An HTTP client on the service, its answers capped."""
        return httpx.Client(
            base_url=self.url, timeout=_TIMEOUT_S, trust_env=False, transport=_CappedTransport()
        )

    def log(self) -> str:
        """The tail of the service's log."""
        return log_tail(self.wiring.log_dir / f"{self._component.name}.log", lines=40)

    def close(self) -> None:
        """Stop the service and release its port."""
        self.stop()
        self._lease.release()


class Serve:
    """Starts the judged service on demand; each call stops the one before."""

    def __init__(self, judged: JudgedService) -> None:
        self._judged = judged
        self._clients: list[httpx.Client] = []

    def __call__(self, env: dict[str, str] | None = None, *, data: Data = "seeded") -> httpx.Client:
        """The service started with `env` added, on `data` (a fresh copy of the seeded
        data, an empty folder, or the data as the last start left it), and a client on it;
        `ComponentStartError` when it does not come up."""
        self._judged.start(env, data=data)
        self._clients.append(self._judged.client())
        return self._clients[-1]

    def refuses(self, env: dict[str, str]) -> bool:
        """Whether the service, started with `env` added, fails to come up."""
        try:
            self(env)
        except ComponentStartError:
            return True
        return False

    def close(self) -> None:
        """Close the clients and stop the service."""
        for client in self._clients:
            client.close()
        self._judged.stop()


def _special(folder: str, names: list[str]) -> list[str]:
    """What the seed left that is not a file, folder or link (a FIFO would hang the copy)."""
    kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
    return [
        name
        for name in names
        if not any(is_kind(os.lstat(os.path.join(folder, name)).st_mode) for is_kind in kept)
    ]


@pytest.fixture(scope="session")
def _stub() -> Iterator[StubUpstream]:
    with StubUpstream() as stub:
        yield stub


@pytest.fixture(scope="session")
def judged_service(_stub: StubUpstream) -> Iterator[JudgedService]:
    """The set's service, seeded once."""
    spec = JudgeSpec.model_validate_json(Path(os.environ[SPEC_ENV]).read_text())
    judged = JudgedService(spec, _stub.port)
    try:
        judged.seed()
        yield judged
    finally:
        judged.close()


@pytest.fixture
def upstream(_stub: StubUpstream) -> Iterator[StubUpstream]:
    """The stub every dependency of the service is; 404 unless the test says otherwise."""
    _stub.reset()
    yield _stub
    _stub.reset()


@pytest.fixture
def serve(
    judged_service: JudgedService, upstream: StubUpstream, request: pytest.FixtureRequest
) -> Iterator[Serve]:
    """Starts the service on demand (stopped after the test)."""
    starter = Serve(judged_service)
    try:
        yield starter
    finally:
        starter.close()
        request.node.add_report_section("teardown", "service log", judged_service.log())


@pytest.fixture
def service(serve: Serve) -> httpx.Client:
    """An HTTP client on a freshly seeded, freshly started submitted service."""
    return serve()


@pytest.fixture
def service_db(judged_service: JudgedService) -> Path:
    """The service's data file, as it stands (read it, never trust it to be well formed)."""
    return judged_service.db_path
