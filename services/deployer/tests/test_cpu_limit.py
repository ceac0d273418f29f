"""The service's CPU limit: it is in its launch and its container, the kernel throttles
past it, and teardown removes the run's CPU cgroups and nothing else.

A service that burns every core starves the harness measuring it; bounded, its own
throttling shows in its cgroup, which the oracle reads (`harness_unstarved`). The kernel
tests need a CPU cgroup this process may create (root on a cgroup v1 `cpu` hierarchy or
v2 with the cpu controller); skipped elsewhere.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_file import compose_document
from sreforge_deployer._cpu import CpuLimit, CpuLimitError, remove_run_cpu_cgroups
from sreforge_deployer._memory import cgroup_name, remove_run_cgroups
from sreforge_deployer._process import Component, LaunchSpec
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec
from sreforge_deployer._wiring import Wiring

from .conftest import STAMPEDE
from .test_compose_file import _run


def _cgroups_available() -> bool:
    try:
        procs = CpuLimit(cgroup_name("probe-cpu-availability", "x"), 0.5).create()
    except (CpuLimitError, OSError):
        return False
    procs.parent.rmdir()
    return True


needs_cgroups = pytest.mark.skipif(not _cgroups_available(), reason="no cpu cgroup here")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def run_id(request: pytest.FixtureRequest) -> Iterator[str]:
    """A run id of this test's own; its cgroups are removed however the test ends."""
    run = f"test-cpu-{request.node.name[:40]}"
    yield run
    remove_run_cgroups(run)


def test_the_service_launch_carries_the_stacks_cpu_limit(tmp_path: Path) -> None:
    """The service gets the stack's `cpu_limit_cores` (one core for bookshelf) in a cgroup
    named for the run; the load generator, harness code, gets none."""
    setup = load_scenario_setup(STAMPEDE)
    spec = load_stack_spec(setup.stack_dir)
    ports = {component.name: 20000 + n for n, component in enumerate(spec.components)}
    for folder in ("workspace", "data"):
        (tmp_path / "r7" / folder).mkdir(parents=True)
    wiring = Wiring(spec, setup, DeployerSettings(python=sys.executable), tmp_path / "r7",
                    ports, 0.1)  # fmt: skip
    service = wiring.launch(spec.component(spec.service), {})
    assert service.cpu_limit == CpuLimit(cgroup_name("r7", spec.service), 1.0)
    assert spec.load is not None
    assert wiring.launch(spec.load, {}).cpu_limit is None


def test_the_service_container_has_the_cpu_limit() -> None:
    services = compose_document(_run())["services"]
    assert services["bookshelf-api"]["cpus"] == 1.0
    assert "cpus" not in services["loadgen"]


_SPIN = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"


@needs_cgroups
def test_past_its_quota_the_kernel_throttles_the_whole_group(tmp_path: Path, run_id: str) -> None:
    """A spinning process under a 5 % quota is throttled (the counter the oracle reads),
    and teardown leaves no CPU cgroup of the run behind."""
    limit = CpuLimit(cgroup_name(run_id, "svc"), 0.05)
    spec = LaunchSpec(
        name="svc",
        argv=[sys.executable, "-c", _SPIN],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        log_path=tmp_path / "svc.log",
        cpu_limit=limit,
    )
    component = Component(spec)
    component.start()
    assert component.process is not None
    folder = limit.create().parent
    try:
        deadline = time.monotonic() + 15
        while _throttled(folder) < 3:
            assert time.monotonic() < deadline, f"never throttled: {_stat(folder)}"
            time.sleep(0.1)
        assert str(component.process.pid) in (folder / "cgroup.procs").read_text().split()
    finally:
        component.stop(5.0)
    assert remove_run_cgroups(run_id) == []
    assert not folder.exists()


@needs_cgroups
def test_teardown_removes_only_the_runs_own_cpu_cgroups(run_id: str) -> None:
    """Another run's cgroup (a run id that merely starts like this one) is left alone."""
    ours = CpuLimit(cgroup_name(run_id, "svc"), 1.0).create().parent
    theirs = CpuLimit(cgroup_name(f"{run_id}0", "svc"), 1.0).create().parent
    try:
        assert remove_run_cpu_cgroups(run_id) == []
        assert not ours.exists()
        assert theirs.is_dir()
    finally:
        remove_run_cpu_cgroups(f"{run_id}0")


def _stat(folder: Path) -> dict[str, int]:
    stat = folder / "cpu.stat"
    pairs = (line.split() for line in stat.read_text().splitlines())
    return {key: int(value) for key, value in pairs}


def _throttled(folder: Path) -> int:
    return _stat(folder).get("nr_throttled", 0)
