"""The CI gate confines the agent's tests: no harness files, no bus, no harness process."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import nats
import pytest
from sreforge_bus.embedded import NatsServer
from sreforge_confine import Bubblewrap
from sreforge_deployer import ConfinementFailed, WorkspaceError
from sreforge_deployer.gate import CiCheckout, merge_and_checkout
from sreforge_deployer.gate._ci import CI_NICENESS, _run_tests

from .conftest import REPO_ROOT, STAMPEDE
from .test_ci import _diff, _git

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.timeout(90),
]

PROBES = Path(__file__).parent / "fixtures" / "cheat" / "probes.py"
_TEST = "def test_ok():\n    assert True\n"
# Inside the checkout: reading and writing its files works (the control); its .git, whose
# objects hold the tree that gets merged, is read-only.
_CHECKOUT_PROBES = {
    "read:checkout": "app.py",
    "write:checkout": "scratch.txt",
    "write:checkout_git_config": ".git/config",
    "write:checkout_git_objects": ".git/objects/planted",
}
# The agent's conftest: run every probe at import, print each outcome in the summary.
_CONFTEST = """
import json
{probes}

FOUND = run(json.loads({targets!r}))


def pytest_terminal_summary(terminalreporter):
    for name, outcome in FOUND.items():
        terminalreporter.write_line(f"PROBE {{name}} {{outcome}}")
"""


@pytest.fixture
def engine_home() -> Iterator[Path]:
    """An engine-home-like folder with a canary, where the engine keeps its own (HOME)."""
    home = Path.home() / ".local" / "state" / f"sreforge-confine-{secrets.token_hex(4)}"
    home.mkdir(parents=True)
    (home / "engine.json").write_text('{"canary": "engine-home"}\n')
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Harness-owned processes the probes try to kill (one for the jail, one for control)."""
    started = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    yield started
    for process in started:
        process.kill()
        process.wait()


def _repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "workspace"
    (path / "tests").mkdir(parents=True)
    (path / "app.py").write_text("VALUE = 1\n")
    (path / "tests" / "test_app.py").write_text(_TEST)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "App")
    return path, _git(path, "rev-parse", "HEAD")


def _targets(engine_home: Path, nats_port: int, sleeper: int) -> dict[str, object]:
    return {
        "read:solution": str(STAMPEDE / "solution" / "fix.patch"),
        "read:verify": str(STAMPEDE / "verify" / "oracle.md"),
        "read:engine_home": str(engine_home / "engine.json"),
        "read:harness_tree": str(REPO_ROOT / "pyproject.toml"),
        "nats:publish": nats_port,
        "kill:sleeper": sleeper,
        "signal:harness": os.getpid(),
    }


def _outcomes(output: str) -> dict[str, str]:
    lines = [line.split(" ", 2) for line in output.splitlines() if line.startswith("PROBE ")]
    return {name: outcome for _, name, outcome in lines}


async def _forged_on_bus(url: str, run_probes: Callable[[], None]) -> list[bytes]:
    """Messages on the forged subject while `run_probes` (a blocking callable) runs."""
    client = await nats.connect(url)
    got: list[bytes] = []

    async def keep(message: nats.aio.msg.Msg) -> None:
        got.append(message.data)

    await client.subscribe("sreforge.forged.>", cb=keep)
    await client.flush()
    await asyncio.to_thread(run_probes)
    await client.flush()
    await client.drain()
    return got


async def test_the_agents_conftest_cannot_read_publish_or_signal_from_ci(
    tmp_path: Path,
    engine_home: Path,
    sleepers: list[subprocess.Popen[bytes]],
    nats_server: NatsServer,
) -> None:
    """A committed conftest.py runs in CI, tries every cheat, and each one fails there
    (the checkout's .git included), while the same probes run on the host succeed (they
    can tell) and reading and writing the checkout itself works inside the jail."""
    jailed, control = sleepers
    targets = _targets(engine_home, nats_server.port, jailed.pid)
    conftest = _CONFTEST.format(
        probes=PROBES.read_text(),
        targets=json.dumps({**targets, **_CHECKOUT_PROBES}),
    )
    path, base = _repo(tmp_path)
    diff = _diff(path, {"conftest.py": conftest})
    gate: list[str] = []

    def run_ci() -> None:
        with CiCheckout(path, base) as checkout:
            result = checkout.run(diff, sys.executable, 60, 100_000)
            gate.append(result.output)
            assert result.green, result.output

    jail_messages = await _forged_on_bus(nats_server.url, run_ci)
    host_targets = {**targets, "kill:sleeper": control.pid, "signal:harness": os.getpid()}

    def run_control() -> None:
        done = subprocess.run(
            [sys.executable, str(PROBES), json.dumps(host_targets)],
            capture_output=True,
            text=True,
            check=True,
        )
        gate.append(done.stdout)

    host_messages = await _forged_on_bus(nats_server.url, run_control)
    found = _outcomes(gate[0])
    assert set(found) == {*targets, *_CHECKOUT_PROBES}, gate[0]
    assert found.pop("read:checkout").startswith("OPEN read VALUE = 1"), gate[0]
    assert found.pop("write:checkout").startswith("OPEN wrote"), gate[0]
    assert all(outcome.startswith("BLOCKED") for outcome in found.values()), found
    assert jail_messages == [], "the jailed conftest published on the bus"
    assert jailed.poll() is None, "the jailed conftest killed a harness process"
    on_host = json.loads(gate[1])
    assert all(outcome.startswith("OPEN") for outcome in on_host.values()), on_host
    assert host_messages == [b'{"forged": true}']
    assert control.wait(timeout=10) == -9


def test_ci_runs_the_extra_pytest_args_inside_the_jail(tmp_path: Path) -> None:
    """`extra_args` reach pytest (a test selection), and the run is still the jail's."""
    path, _ = _repo(tmp_path)
    (path / "tests" / "test_other.py").write_text("def test_other():\n    assert False\n")
    code, output = _run_tests(path, sys.executable, 60, ["tests/test_app.py"])
    assert code == 0, output
    assert "1 passed" in output
    code, output = _run_tests(path, sys.executable, 60, ["tests/test_other.py"])
    assert code == 1, output


def test_ci_tests_yield_the_cpu_to_the_stacks_being_measured(tmp_path: Path) -> None:
    """The gate's tests run at CI_NICENESS: a busy CI must not starve another run's load
    generator or Prometheus (the test reads its own niceness inside the jail)."""
    path, _ = _repo(tmp_path)
    (path / "tests" / "test_nice.py").write_text(
        f"import os\n\ndef test_nice():\n    assert os.nice(0) >= {CI_NICENESS}\n"
    )
    code, output = _run_tests(path, sys.executable, 60, ["tests/test_nice.py"])
    assert code == 0, output


def test_ci_without_bubblewrap_runs_no_test_at_all(tmp_path: Path) -> None:
    """No bwrap, no CI: the gate fails closed naming bwrap; the agent's code never ran."""
    path, base = _repo(tmp_path)
    marker = tmp_path / "ran-unconfined"
    diff = _diff(path, {"conftest.py": f"open({str(marker)!r}, 'w').write('ran')\n"})
    missing = Bubblewrap("/nonexistent/bwrap")
    with (
        CiCheckout(path, base, missing) as checkout,
        pytest.raises(ConfinementFailed, match="bwrap"),
    ):
        checkout.run(diff, sys.executable, 60, 10_000)
    assert not marker.exists()


def test_the_merge_runs_none_of_the_agents_git_programs(tmp_path: Path) -> None:
    """The agent's workspace .git holds a post-checkout and a reference-transaction hook, an
    fsmonitor, a smudge filter its .gitattributes selects and a hooksPath: the merge on the
    host runs none of them, and still lands the tested tree."""
    path, base = _repo(tmp_path)
    planted = tmp_path / "planted"
    program = path / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {planted}\ncat\n')
    program.chmod(0o755)
    hooks = path / ".git" / "hooks"
    for hook in ("post-checkout", "reference-transaction", "pre-auto-gc"):
        shutil.copy(program, hooks / hook)
    for key, value in (
        ("core.fsmonitor", str(program)),
        ("filter.evil.smudge", str(program)),
        ("filter.evil.clean", str(program)),
        ("core.hooksPath", str(hooks)),
    ):
        _git(path, "config", key, value)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    diff = _diff(path, {"app.py": "VALUE = 2\n", ".gitattributes": "*.py filter=evil\n"})
    planted.unlink(missing_ok=True)  # making the diff ran them: that was the agent's own git
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 60, 10_000)
        assert gate.green, gate.output
        assert gate.tree is not None
        merge_and_checkout(checkout, gate.tree)
    assert not planted.exists(), planted.read_text()
    assert (path / "app.py").read_text() == "VALUE = 2\n"


def test_a_workspace_whose_git_dir_points_elsewhere_is_not_merged(tmp_path: Path) -> None:
    """A `.git` file (gitdir: elsewhere) is refused before git touches anything."""
    path, base = _repo(tmp_path)
    diff = _diff(path, {"app.py": "VALUE = 3\n"})
    with CiCheckout(path, base) as checkout:
        gate = checkout.run(diff, sys.executable, 60, 10_000)
        assert gate.tree is not None, gate.output
        shutil.move(path / ".git", tmp_path / "elsewhere.git")
        (path / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere.git'}\n")
        with pytest.raises(WorkspaceError, match=r"\.git is not a folder"):
            merge_and_checkout(checkout, gate.tree)
