"""The deployed service runs the agent's code confined: it reaches its upstream and is
reached on its port, and nothing else of the host (files, bus, processes, ports)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sreforge_bus.embedded import NatsServer
from sreforge_deployer import ConfinementFailed, DeployerSettings
from sreforge_deployer.local import LocalStack

from .conftest import FIXTURES, REPO_ROOT, STAMPEDE, TINY_SCENARIOS
from .test_ci_confined import _forged_on_bus
from .test_local_stack import _nothing_left

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.timeout(120),
]

CHEAT = FIXTURES / "cheat"
TINY = FIXTURES / "tiny" / "stacks" / "tiny"
_CONTROLS = ("read:workspace", "get:upstream", "write:data")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A harness-owned process the service tries to kill."""
    process = subprocess.Popen(["sleep", "120"])
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def engine_home() -> Iterator[Path]:
    """An engine-home-like folder with a canary under HOME, where the engine keeps its own."""
    home = Path.home() / ".local" / "state" / f"sreforge-confine-{os.getpid()}-svc"
    home.mkdir(parents=True, exist_ok=True)
    (home / "engine.json").write_text('{"canary": "engine-home"}\n')
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _cheat_scenario(root: Path, targets: dict[str, object]) -> Path:
    """A use case with the cheat stack and a scenario holding solution/ and verify/."""
    stack = root / "stacks" / "cheat"
    (stack / "app").mkdir(parents=True)
    (stack / "upstream").mkdir()
    shutil.copy(CHEAT / "stack.toml", stack)
    shutil.copy(CHEAT / "server.py", stack / "app")
    shutil.copy(CHEAT / "probes.py", stack / "app")
    shutil.copy(TINY / "app" / "server.py", stack / "upstream")
    shutil.copytree(TINY / "observability", stack / "observability")
    scenario = root / "scenarios" / "cheat-ok"
    shutil.copytree(TINY_SCENARIOS / "tiny-ok", scenario)
    manifest = scenario / "scenario.toml"
    text = manifest.read_text().replace('"tiny-ok"', '"cheat-ok"').replace('"tiny"', '"cheat"')
    manifest.write_text(text)
    for folder, name in (("solution", "fix.patch"), ("verify", "oracle.md")):
        (scenario / folder).mkdir()
        (scenario / folder / name).write_text(f"canary of {folder}\n")
    local = {
        "read:scenario_solution": str(scenario / "solution" / "fix.patch"),
        "read:scenario_verify": str(scenario / "verify" / "oracle.md"),
    }
    (stack / "app" / "targets.json").write_text(json.dumps({**targets, **local}))
    return scenario


def _probes(stack: LocalStack) -> dict[str, str]:
    """What the service found at start-up, fetched through its port from the host."""
    response = httpx.get(f"{stack.url('cheat-api')}/probes", timeout=10, trust_env=False)
    response.raise_for_status()
    found: dict[str, str] = response.json()
    return found


def _assert_confined(found: dict[str, str]) -> None:
    for name in _CONTROLS:
        assert found[name].startswith("OPEN"), (name, found[name])
    blocked = {name: outcome for name, outcome in found.items() if name not in _CONTROLS}
    assert len(blocked) == 11, sorted(found)
    assert all(outcome.startswith("BLOCKED") for outcome in blocked.values()), blocked


async def test_the_deployed_service_can_neither_read_publish_nor_signal(
    tmp_path: Path,
    settings: DeployerSettings,
    nats_server: NatsServer,
    sleeper: subprocess.Popen[bytes],
    engine_home: Path,
) -> None:
    """The service's start-up code tries the scenario's solution/ and verify/, the real
    scenarios' too, the engine home, the harness tree, the bus, a harness process and an
    undeclared port: all fail, both at up() and after a redeploy; its declared upstream,
    its data dir and its own workspace work; the host reaches it on its port; teardown
    leaves nothing (the relay included)."""
    targets = {
        "read:solution": str(STAMPEDE / "solution" / "fix.patch"),
        "read:verify": str(STAMPEDE / "verify" / "oracle.md"),
        "read:engine_home": str(engine_home / "engine.json"),
        "read:harness_tree": str(REPO_ROOT / "pyproject.toml"),
        "nats:publish": nats_server.port,
        "kill:sleeper": sleeper.pid,
        "signal:harness": os.getpid(),
        "read:workspace": "server.py",
    }
    scenario = _cheat_scenario(tmp_path / "uc", targets)
    stack = LocalStack(scenario, time_scale=0.1, settings=settings)
    seen: list[dict[str, str]] = []

    def up_probe_redeploy_probe() -> None:
        stack.up()
        seen.append(_probes(stack))
        stack.redeploy()
        seen.append(_probes(stack))

    try:
        forged = await _forged_on_bus(nats_server.url, up_probe_redeploy_probe)
        for found in seen:
            _assert_confined(found)
        assert forged == [], "the service published on the bus"
        assert sleeper.poll() is None, "the service killed a harness process"
        assert not (stack.run_dir / "workspace" / "planted.txt").exists()
        _assert_relay_leads_a_jail(stack)
    finally:
        stack.down()
    _nothing_left(stack)


def _assert_relay_leads_a_jail(stack: LocalStack) -> None:
    """The service's group leader is the host relay holding its port; the app runs in a
    PID namespace of its own."""
    pgid = stack.pgids()["cheat-api"]
    leader = psutil.Process(pgid)
    assert "--linger" in leader.cmdline()
    holders = {
        conn.pid
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == stack.ports["cheat-api"]
    }
    assert holders == {pgid}
    app = [p for p in leader.children(recursive=True) if p.cmdline()[1:2] == ["server.py"]]
    assert app, "the app runs under the relay"
    ours = os.readlink("/proc/self/ns/pid")
    assert all(os.readlink(f"/proc/{p.pid}/ns/pid") != ours for p in app)


def test_without_bubblewrap_no_stack_comes_up(tmp_path: Path) -> None:
    """No bwrap, no stack: up() fails closed naming bwrap before any process, port or run
    dir exists (the service would have run the agent's code unconfined)."""
    settings = DeployerSettings(runs_root=tmp_path / "runs", bwrap_path="/nonexistent/bwrap")
    stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=settings)
    with pytest.raises(ConfinementFailed, match=r"bwrap \('/nonexistent/bwrap'\) not found"):
        stack.up()
    assert stack.pgids() == {}
    assert not stack.run_dir.exists()
