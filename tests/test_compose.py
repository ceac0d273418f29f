"""`compose.yaml` against a real Docker engine: valid, its NATS serves the home's bus users,
and `down -v` leaves nothing of the project (container, network, volume)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sreforge_bus import BOOTSTRAP_USER, OPERATOR_USER, BusCredentials, BusError, bootstrap, connect
from wholerun import (
    DOCKER_LANE,
    SCENARIO,
    TIME_SCALE,
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    open_pool,
    stack_image_inputs_ready,
)

from sreforge._engine import bus_credentials
from sreforge._settings import EngineSettings

pytestmark = pytest.mark.docker

CHECKOUT = Path(__file__).resolve().parents[1]
ENGINE_SCRIPT = CHECKOUT / "scripts" / "docker-engine"
STARTED_MARK = CHECKOUT / ".sreforge" / "dockerd.pid"


def _engine_answers() -> bool:
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@pytest.fixture(scope="module")
def docker_engine() -> Iterator[None]:
    """A Docker engine with Compose and local/bookworm: the running one, else one started by
    `scripts/docker-engine` and stopped afterwards (only that one, by its PID)."""
    started_here = not STARTED_MARK.exists() and not _engine_answers()
    setup = subprocess.run([ENGINE_SCRIPT, "start"], capture_output=True, text=True, check=False)
    if setup.returncode != 0 or not _engine_answers():
        pytest.skip(f"no Docker engine could start here: {setup.stderr.strip()[-300:]}")
    try:
        yield
    finally:
        if started_here:
            subprocess.run([ENGINE_SCRIPT, "stop"], check=False)


@pytest.fixture(scope="module")
def build_context(docker_engine: None) -> None:
    """What compose.yaml builds from (pinned nats-server, lockfile wheels), prepared on the host."""
    script = CHECKOUT / "scripts" / "compose-context"
    subprocess.run([script, "--images-only"], check=True, capture_output=True, timeout=300)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Project:
    """One throwaway Compose project of compose.yaml: its own name, engine home and NATS port."""

    def __init__(self, home: Path) -> None:
        self.name = f"sreforge-test-{secrets.token_hex(4)}"
        self.port = _free_port()
        self.trigger_port = _free_port()
        self.monitor_port = _free_port()
        self.env = {
            **os.environ,
            "COMPOSE_BAKE": "false",
            "SREFORGE_CHECKOUT": str(CHECKOUT),
            "SREFORGE_HOME": str(home),
            "SREFORGE_NATS_PORT": str(self.port),
            "SREFORGE_NATS_URL": f"nats://127.0.0.1:{self.port}",
            "SREFORGE_TRIGGER_PORT": str(self.trigger_port),
            "SREFORGE_NATS_MONITOR_PORT": str(self.monitor_port),
            "SREFORGE_RUNS_DIR": str(home.parent / "runs"),
            "SREFORGE_RECORDER_BANK": "false",
        }

    def compose(self, *args: str, timeout: float = 120) -> str:
        """`docker compose -p <name> -f compose.yaml ARGS`: its stdout; fails on a non-zero exit."""
        command = ["docker", "compose", "-p", self.name, "-f", str(CHECKOUT / "compose.yaml")]
        done = subprocess.run(
            [*command, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"docker compose {' '.join(args)}: {done.stderr[-2000:]}"
        return done.stdout

    def leftovers(self) -> dict[str, list[str]]:
        """The project's containers, networks and volumes the engine still has."""
        label = f"label=com.docker.compose.project={self.name}"
        found = {}
        for kind, listing in {
            "containers": ["ps", "-aq"],
            "networks": ["network", "ls", "-q"],
            "volumes": ["volume", "ls", "-q"],
        }.items():
            done = subprocess.run(
                ["docker", *listing, "--filter", label], capture_output=True, text=True, check=True
            )
            found[kind] = done.stdout.split()
        return found


@pytest.fixture
def credentials(tmp_path: Path) -> BusCredentials:
    """A fresh engine home's bus users and their server.conf, as `sreforge bus config` makes."""
    return bus_credentials(EngineSettings(home=tmp_path / "home"))


@pytest.mark.timeout(300)  # the first test also waits for the engine and the wheels, if cold
def test_compose_yaml_is_valid_and_publishes_on_loopback_only(
    build_context: None, tmp_path: Path
) -> None:
    """Every service runs under an init and no port is published beyond 127.0.0.1."""
    project = Project(tmp_path / "home")
    config = json.loads(project.compose("config", "--format", "json"))
    services = config["services"]
    engine = {"trigger", "correlator", "context", "deployer", "runner", "oracle", "recorder"}
    assert {"nats", *engine} <= set(services)
    for name, service in services.items():
        assert service.get("init") is True, f"{name} has no init"
        for published in service.get("ports", []):
            assert published["host_ip"] == "127.0.0.1", f"{name} publishes {published}"
    assert "nats-store" in config["volumes"]


def test_the_engine_containers_import_every_package_of_the_checkout() -> None:
    """The services' PYTHONPATH names every workspace package's source folder: a package
    missing there (libs/report once) crashed its service in the container, and the run
    ended without a record."""
    text = (CHECKOUT / "compose.yaml").read_text()
    packages = sorted(
        str(src.relative_to(CHECKOUT)) for src in [CHECKOUT / "src", *CHECKOUT.glob("*/*/src")]
    )
    missing = [path for path in packages if "${SREFORGE_CHECKOUT}/" + path not in text]
    assert not missing, f"compose.yaml's PYTHONPATH lacks {missing}"


@pytest.mark.timeout(240)
async def test_compose_nats_serves_the_home_users_and_down_leaves_nothing(
    build_context: None, credentials: BusCredentials, tmp_path: Path
) -> None:
    """The NATS of compose.yaml enforces the home's users, keeps JetStream state in its volume,
    and `down -v` removes every container, network and volume of the project."""
    project = Project(credentials.config_file.parent.parent)
    url = f"nats://127.0.0.1:{project.port}"
    try:
        project.compose("up", "-d", "--wait", "--build", "nats", timeout=180)
        with pytest.raises(BusError):
            await connect(url, name="pytest-anonymous", connect_timeout=3.0)
        setup = await connect(url, name="pytest", credential=credentials.credential(BOOTSTRAP_USER))
        try:
            assert setup.server_requires_auth
            await bootstrap(setup)
        finally:
            await setup.close()
        operator = await connect(
            url, name="pytest-operator", credential=credentials.credential(OPERATOR_USER)
        )
        await operator.close()
        assert project.leftovers()["volumes"], "the NATS store has no volume"
    finally:
        project.compose("down", "-v", "--remove-orphans", timeout=60)
    assert project.leftovers() == {"containers": [], "networks": [], "volumes": []}


def _engine_incident(run: Run) -> None:
    """`docker compose up -d` of compose.yaml, one `sreforge run … --agent reference` from the
    host, `down -v`; the CLI's outcome in `run.stdout`, the project's leftovers and, on a
    failure, why (`up`'s error, or the deployer's and runner's logs) in files of `run.root`."""
    credentials = bus_credentials(EngineSettings(home=run.root / "home"))
    home = credentials.config_file.parent.parent
    (home.parent / "runs").mkdir()
    project = Project(home)
    run.started = time.monotonic()
    try:
        try:
            project.compose("up", "-d", "--wait", "--build", timeout=420)
        except (AssertionError, subprocess.TimeoutExpired) as error:
            (run.root / "engine-logs.txt").write_text(f"compose up failed: {error}")
            return
        quick_run = ["--agent", "reference", "--time-scale", TIME_SCALE, "--json"]
        run.follow([sys.executable, "-m", "sreforge", "run", SCENARIO, *quick_run], project.env)
        if run.exit_code != 0:
            logs = project.compose("logs", "--no-color", "--tail", "40", "deployer", "runner")
            (run.root / "engine-logs.txt").write_text(logs)
    finally:
        project.compose("down", "-v", "--remove-orphans", timeout=120)
        (run.root / "leftovers.json").write_text(json.dumps(project.leftovers()))
        run.wall_s = time.monotonic() - run.started


_OPTED_OUT = os.environ.get("SREFORGE_COMPOSE_E2E") == "0"
RUNS = {"engine": RunSpec("reference", execute=_engine_incident, lane=DOCKER_LANE)}
TEST_RUNS = (
    {}
    if _OPTED_OUT
    else {"test_compose_engine_passes_the_reference_fix_and_down_leaves_nothing": "engine"}
)
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS, prepare=stack_image_inputs_ready)
"""compose.yaml's whole incident runs in the session's pool, in the Docker lane: beside a
compose run's stack, either one's client-side SLI could miss its bar by a hair."""


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest, stack_image_inputs: None) -> Iterator[RunPool]:
    """The module's one whole run; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.integration
@pytest.mark.timeout(900)
@pytest.mark.skipif(_OPTED_OUT, reason="SREFORGE_COMPOSE_E2E=0 opts out")
def test_compose_engine_passes_the_reference_fix_and_down_leaves_nothing(pool: RunPool) -> None:
    """`docker compose up -d` of compose.yaml runs a whole incident: `sreforge run ... --agent
    reference` from the host passes with a record on the host, and `down -v` then leaves no
    container, network or volume of the project."""
    run = pool.result("engine")
    outcome = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else {}
    logs = run.root / "engine-logs.txt"
    assert run.exit_code == 0, (
        f"exit {run.exit_code}: {outcome or run.progress}\n"
        f"{logs.read_text() if logs.exists() else ''}"
    )
    assert outcome["verdict"] == "passed"
    record = Path(outcome["record"])
    assert record.parent.parent == run.root / "runs", "the record is not on the host"
    assert json.loads(record.read_text())["run_id"] == outcome["run_id"]
    leftovers = json.loads((run.root / "leftovers.json").read_text())
    assert leftovers == {"containers": [], "networks": [], "volumes": []}
