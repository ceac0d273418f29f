"""A component's memory limit: the kernel kills past it, the jailed code cannot lift it,
and teardown removes the run's cgroups and nothing else.

Needs a memory cgroup this process may create (root on a cgroup v1 memory hierarchy or a
v2 one with the memory controller); skipped elsewhere.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sreforge_deployer import DeployerSettings
from sreforge_deployer._confine import confine, confinement_for, service_jail
from sreforge_deployer._memory import (
    MemoryLimit,
    MemoryLimitError,
    cgroup_name,
    remove_run_cgroups,
)
from sreforge_deployer._process import Component, LaunchSpec
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec
from sreforge_deployer._wiring import Wiring

from .conftest import BOOKSHELF, STAMPEDE

LIMIT_MB = 64


def _cgroups_available() -> bool:
    try:
        procs = MemoryLimit(cgroup_name("probe-availability", "x"), LIMIT_MB).create()
    except (MemoryLimitError, OSError):
        return False
    procs.parent.rmdir()
    return True


needs_cgroups = pytest.mark.skipif(
    not _cgroups_available(), reason="no memory cgroup can be made here"
)
pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("scenario", "limit_mb"),
    [(STAMPEDE, None), (BOOKSHELF / "scenarios" / "memory-leak-restarts", 192)],
    ids=["none-asked", "scenario-sized"],
)
def test_the_service_launch_carries_its_limit(
    tmp_path: Path, scenario: Path, limit_mb: int | None
) -> None:
    """The service gets the scenario's SERVICE_MEMORY_LIMIT_MB (else the stack's
    `memory_limit_mb`, unset for bookshelf), in a cgroup named for the run; the load
    generator gets none."""
    setup = load_scenario_setup(scenario)
    spec = load_stack_spec(setup.stack_dir)
    ports = {component.name: 20000 + n for n, component in enumerate(spec.components)}
    for folder in ("workspace", "data"):
        (tmp_path / "r7" / folder).mkdir(parents=True)
    wiring = Wiring(spec, setup, DeployerSettings(python=sys.executable), tmp_path / "r7",
                    ports, 0.1)  # fmt: skip
    service = wiring.launch(spec.component(spec.service), {})
    expected = None if limit_mb is None else MemoryLimit(cgroup_name("r7", spec.service), limit_mb)
    assert service.memory_limit == expected
    assert spec.load is not None
    assert wiring.launch(spec.load, {}).memory_limit is None


# Tries every way out of the limit a workspace's code has (a gunicorn.conf.py or the app
# can run anything) and reports what worked. As root outside the jail it would lift the
# limits of every cgroup on the host, so it refuses to run anywhere but in the jail.
_CHEAT = r"""
import glob, json, os, subprocess, sys
if not os.path.exists("/run/relay.py"):  # the jail's own mount: never touch a host cgroup
    print(json.dumps({"escaped": ["not in the service's jail"]}), flush=True)
    sys.exit(2)
escaped = []
for path in glob.glob("/sys/fs/cgroup/**/memory.*limit*", recursive=True) + glob.glob(
        "/sys/fs/cgroup/**/memory.max", recursive=True):
    try:
        open(path, "w").write("-1" if path.endswith("_bytes") else "max")
        escaped.append("raised " + path)
    except OSError:
        pass
for path in glob.glob("/sys/fs/cgroup/**/cgroup.procs", recursive=True):
    try:
        open(path, "w").write(str(os.getpid()))
        escaped.append("moved into " + path)
    except OSError:
        pass
os.makedirs("/tmp/cg", exist_ok=True)
for kind in (["-t", "cgroup", "-o", "memory"], ["-t", "cgroup2"]):
    done = subprocess.run(["mount", *kind, "none", "/tmp/cg"], capture_output=True)
    if done.returncode == 0:
        escaped.append("mounted " + " ".join(kind))
print(json.dumps({"escaped": escaped}), flush=True)
"""
_ALLOCATE = r"""
import json
held = []
for n in range(1, 64):
    held.append(bytearray(8 * 2**20))
    print(json.dumps({"held_mb": 8 * n}), flush=True)
"""


@pytest.fixture
def run_id(request: pytest.FixtureRequest) -> Iterator[str]:
    """A run id of this test's own; its cgroups are removed however the test ends."""
    run = f"test-memory-{request.node.name[:40]}".replace("[", "-").replace("]", "")
    yield run
    remove_run_cgroups(run)


def _reports(log: Path) -> list[dict[str, object]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line) for line in lines if line.startswith("{")]


def _held_mb(log: Path) -> int:
    return max((int(str(r["held_mb"])) for r in _reports(log) if "held_mb" in r), default=0)


def _run_to_the_end(spec: LaunchSpec) -> int:
    component = Component(spec)
    component.start()
    assert component.process is not None
    return component.process.wait(timeout=60)


@needs_cgroups
def test_past_the_limit_the_kernel_kills_the_process(tmp_path: Path, run_id: str) -> None:
    """A process that allocates 504 MB under a 64 MB limit is SIGKILLed near 64 MB, and
    teardown leaves no cgroup of the run behind."""
    limit = MemoryLimit(cgroup_name(run_id, "svc"), LIMIT_MB)
    spec = LaunchSpec(
        name="svc",
        argv=[sys.executable, "-c", _ALLOCATE],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        log_path=tmp_path / "svc.log",
        memory_limit=limit,
    )
    code = _run_to_the_end(spec)
    assert code == -9
    assert 8 <= _held_mb(spec.log_path) < LIMIT_MB
    assert limit.folder().is_dir()
    assert remove_run_cgroups(run_id) == []
    assert not limit.folder().exists()


@needs_cgroups
def test_teardown_removes_only_the_runs_own_cgroups(run_id: str) -> None:
    """Another run's cgroup (a run id that merely starts like this one) is left alone."""
    ours = MemoryLimit(cgroup_name(run_id, "svc"), LIMIT_MB)
    theirs = MemoryLimit(cgroup_name(f"{run_id}0", "svc"), LIMIT_MB)
    ours.create()
    theirs.create()
    try:
        assert remove_run_cgroups(run_id) == []
        assert not ours.folder().exists()
        assert theirs.folder().is_dir()
    finally:
        remove_run_cgroups(f"{run_id}0")


@needs_cgroups
@pytest.mark.integration
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_the_jailed_service_cannot_lift_or_leave_its_limit(tmp_path: Path, run_id: str) -> None:
    """The service's jail (what a workspace's gunicorn.conf.py or app runs in) sees no
    cgroup to raise, cannot move itself out, cannot mount one: it is killed at the limit
    like any other process, and the limit it had is still the one set."""
    workspace, data = tmp_path / "workspace", tmp_path / "data"
    workspace.mkdir()
    data.mkdir()
    limit = MemoryLimit(cgroup_name(run_id, "bookshelf-api"), LIMIT_MB)
    jail = service_jail(
        [sys.executable, "-c", _CHEAT + _ALLOCATE],
        workspace,
        workspace=workspace,
        data_dir=data,
        python=sys.executable,
        outbound=[],
        port=1,
        relay_dir=tmp_path / "net",
    )
    confined = confine(confinement_for("bwrap"), jail)
    spec = LaunchSpec(
        name="bookshelf-api",
        argv=confined.argv,
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin", "HOME": str(data)},
        log_path=tmp_path / "svc.log",
        folders=confined.folders,
        memory_limit=limit,
    )
    assert _run_to_the_end(spec) != 0
    reports = _reports(spec.log_path)
    assert reports[0] == {"escaped": []}, spec.log_path.read_text()[-2000:]
    assert _held_mb(spec.log_path) < LIMIT_MB
    limit_file = limit.folder() / "memory.limit_in_bytes"
    if not limit_file.exists():
        limit_file = limit.folder() / "memory.max"
    assert int(limit_file.read_text()) == LIMIT_MB * 2**20
