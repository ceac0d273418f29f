"""The judge process's pytest plugin: a `service` fixture serving the submitted tree.

Loaded by `_judge` with `-p`; reads its `JudgeSpec` from `SREFORGE_JUDGE_SPEC`. The
stack's seed runs once per set, confined, on the submitted tree; each test gets a fresh
copy of that data and a fresh service, started as a run starts it (the stack's argv and
env, the scenario's runtime env, the service's jail) but reaching nothing: no upstream,
no egress. `service` is an `httpx.Client` on it whose responses are capped in size (the
service is the agent's code, and so is every byte it answers).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sreforge_deployer._ports import PortAllocator, PortLease, wait_bindable
from sreforge_deployer._process import Component, log_tail, run_once
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec
from sreforge_deployer._wiring import Wiring
from sreforge_deployer.gate._judge import SPEC_ENV, JudgeSpec

__all__ = ["MAX_RESPONSE_BYTES", "JudgedService", "service"]

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""A bigger answer fails the test that asked (the judge's memory is not the agent's)."""
_TIMEOUT_S = 10.0
_UNREACHABLE = 9  # the jail has no relay for it: a dependency's dial is refused at once
_STOP_S = 5.0


class _CappedTransport(httpx.BaseTransport):
    """Reads each response body up to `MAX_RESPONSE_BYTES`, then refuses it."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport(retries=0)

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


class JudgedService:
    """The set's submitted service: seeded once, started fresh for each test."""

    def __init__(self, spec: JudgeSpec) -> None:
        self.spec = spec
        setup = load_scenario_setup(spec.scenario_dir)
        stack = load_stack_spec(setup.stack_dir)
        service = stack.component(stack.service)
        # The judged service reaches nothing: its dependencies are not started here.
        self._component = service.model_copy(update={"reaches": [], "egress": []})
        self._runtime_env = setup.runtime_env
        allocator = PortAllocator(spec.port_lock_dir, spec.port_range_low, spec.port_range_high)
        self._lease: PortLease = allocator.lease(1)[0]
        ports = {component.name: _UNREACHABLE for component in stack.components}
        ports[stack.service] = self._lease.port
        settings = DeployerSettings(
            python=spec.python,
            bwrap_path=spec.bwrap_path,
            port_lock_dir=spec.port_lock_dir,
            use_cases=setup.directory.parent.parent.parent,
        )
        self.wiring = Wiring(stack, setup, settings, spec.run_dir, ports, 1.0)
        self._seeded = spec.run_dir / "seeded"

    @property
    def url(self) -> str:
        """The service's loopback address on the host."""
        return self.wiring.url(self._component.name)

    def seed(self) -> None:
        """Run the stack's seed on the submitted tree, confined; keep what it wrote."""
        self.wiring.data_dir.mkdir(parents=True, exist_ok=True)
        launch = self.wiring.seed_launch(confined=True)
        if launch is not None:
            run_once(launch)
        shutil.copytree(self.wiring.data_dir, self._seeded, symlinks=True, ignore=_special)

    def start(self) -> Component:
        """A fresh copy of the seeded data and the service on it, health-gated."""
        data = self.wiring.data_dir
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(self._seeded, data, symlinks=True)
        wait_bindable(self._lease.port, _STOP_S)
        component = Component(self.wiring.launch(self._component, self._runtime_env))
        component.start()
        assert component.pgid is not None
        with self.spec.pgid_file.open("a") as listed:
            listed.write(f"{component.pgid}\n")
        component.wait_healthy()
        return component

    def log(self) -> str:
        """The tail of the service's log."""
        return log_tail(self.wiring.log_dir / f"{self._component.name}.log", lines=40)

    def close(self) -> None:
        """Release the port."""
        self._lease.release()


def _special(folder: str, names: list[str]) -> list[str]:
    """What the seed left that is not a file, folder or link (a FIFO would hang the copy)."""
    kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
    return [
        name
        for name in names
        if not any(is_kind(os.lstat(os.path.join(folder, name)).st_mode) for is_kind in kept)
    ]


@pytest.fixture(scope="session")
def judged_service() -> Iterator[JudgedService]:
    """The set's service, seeded once."""
    spec = JudgeSpec.model_validate_json(Path(os.environ[SPEC_ENV]).read_text())
    judged = JudgedService(spec)
    try:
        judged.seed()
        yield judged
    finally:
        judged.close()


@pytest.fixture
def service(
    judged_service: JudgedService, request: pytest.FixtureRequest
) -> Iterator[httpx.Client]:
    """An HTTP client on a freshly started, freshly seeded submitted service."""
    component = judged_service.start()
    try:
        with httpx.Client(
            base_url=judged_service.url,
            timeout=_TIMEOUT_S,
            trust_env=False,
            transport=_CappedTransport(),
        ) as client:
            yield client
    finally:
        component.stop(_STOP_S)
        request.node.add_report_section("teardown", "service log", judged_service.log())
