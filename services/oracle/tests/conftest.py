"""Real servers for the oracle's probe tests: Prometheus, Alertmanager, load-generator exporters."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

RULES = """\
groups:
  - name: oracle-probe-test
    interval: 100ms
    rules:
      - alert: TargetFiring
        expr: vector(1) > 0
        labels: {service: api, severity: page}
      - alert: StaysPending
        expr: vector(1) > 0
        for: 1h
        labels: {service: api}
      - alert: NeverFires
        expr: vector(1) < 0
        labels: {service: api}
      - alert: Ambient
        expr: vector(1) > 0
        labels: {service: api, role: ambient}
      - record: api:request_latency_p99_seconds
        expr: vector(0.123)
      - record: api:idle_latency_p99_seconds
        expr: vector(0) / 0
"""

SCENARIO = """\
id = "{id}"
use_case = "oracle-test"
stack = "oracle-test-stack"
profile = "incident"
title = "Oracle adapter test scenario"
family = "latency"
difficulty = "easy"

[expected]
alert = "{alert}"
p99_threshold_seconds = 0.3
p99_promql = "api:request_latency_p99_seconds"

[determinism]
sustained_clear_seconds = {sustained}
max_clear_time_seconds = {max_clear}

[inject]
mode = "storm"

[verify]
pass_threshold = 0.85
signals = ["ci_green", "alert_cleared", "sustained_clear", "time_to_clear", "no_new_alerts"]
scope = ["api"]

[verify.weights]
ci_green = 0.25
alert_cleared = 0.35
sustained_clear = 0.20
time_to_clear = 0.10
no_new_alerts = 0.10
"""

CONFIG = """\
global:
  scrape_interval: 100ms
  scrape_timeout: 100ms
  evaluation_interval: 100ms
rule_files: [rules.yml]
scrape_configs:
  - job_name: loadgen
    static_configs: [{{targets: ["127.0.0.1:{steady}"]}}]
  - job_name: doomed
    static_configs: [{{targets: ["127.0.0.1:{doomed}"]}}]
"""


_EXPORTER = """\
import sys, threading
from prometheus_client import CollectorRegistry, Gauge, start_http_server
registry = CollectorRegistry()
Gauge("loadgen_target_rps", "Offered rate", registry=registry).set(float(sys.argv[1]))
Gauge("loadgen_achieved_rps", "Achieved rate", registry=registry).set(float(sys.argv[2]))
server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
print(server.server_port, flush=True)
threading.Event().wait()
"""


@dataclass
class Exporter:
    """A load generator's metrics endpoint (prometheus_client), stoppable to simulate its death.

    A process of its own: served from a thread of the busy test process, a scrape waited on
    the GIL past its 100 ms timeout on a loaded machine, and the series went stale.
    """

    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@dataclass
class Prometheus:
    """A running Prometheus and the exporters it scrapes."""

    url: str
    steady: Exporter
    doomed: Exporter


def write_scenario(
    root: Path, scenario_id: str, alert: str, *, sustained: float = 20, max_clear: float = 30
) -> Path:
    """A scenario folder under `root/oracle-test/scenarios/` (windows in seconds at scale 1)."""
    folder = root / "oracle-test" / "scenarios" / scenario_id
    folder.mkdir(parents=True, exist_ok=True)
    text = SCENARIO.format(id=scenario_id, alert=alert, sustained=sustained, max_clear=max_clear)
    (folder / "scenario.toml").write_text(text)
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_exporter(target: float, achieved: float) -> Exporter:
    argv = [sys.executable, "-c", _EXPORTER, str(target), str(achieved)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        process.wait(timeout=10)
        pytest.fail(f"the load exporter did not start (exit {process.poll()}): {line!r}")
    return Exporter(process, int(line))


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{log.stem} exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    pytest.fail(f"{log.stem} not ready at {url} within {deadline_s}s: {log.read_text()[-2000:]}")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def launch_prometheus(home: Path, port: int) -> subprocess.Popen[bytes]:
    """Start Prometheus on `port` with `home`'s config and data (appending to its log)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is missing (apt install prometheus)")
    with (home / "prometheus.log").open("ab") as out:
        return subprocess.Popen(
            [
                binary,
                f"--config.file={home / 'prometheus.yml'}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A real Prometheus (100 ms scrape and eval) with the test rules and two exporters."""
    home = tmp_path_factory.mktemp("prometheus")
    steady, doomed = start_exporter(20.0, 19.5), start_exporter(10.0, 10.0)
    (home / "rules.yml").write_text(RULES)
    (home / "prometheus.yml").write_text(CONFIG.format(steady=steady.port, doomed=doomed.port))
    port = free_port()
    process = launch_prometheus(home, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, home / "prometheus.log", deadline_s=30)
        yield Prometheus(url, steady, doomed)
    finally:
        stop_group(process)
        steady.stop()
        doomed.stop()


ALERTMANAGER_CONFIG = """\
route: {receiver: sink}
receivers: [{name: sink}]
"""


def launch_alertmanager(home: Path, port: int) -> subprocess.Popen[bytes]:
    """Start Alertmanager on `port` with `home`'s config (clustering off)."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        pytest.fail("the alertmanager binary is missing (apt install prometheus-alertmanager)")
    if not (home / "alertmanager.yml").exists():
        (home / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG)
    with (home / "alertmanager.log").open("ab") as out:
        return subprocess.Popen(
            [
                binary,
                f"--config.file={home / 'alertmanager.yml'}",
                f"--storage.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Alertmanager's URL (nothing sends it alerts)."""
    home = tmp_path_factory.mktemp("alertmanager")
    port = free_port()
    process = launch_alertmanager(home, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, home / "alertmanager.log", deadline_s=30)
        yield url
    finally:
        stop_group(process)


@pytest.fixture
def load_exporter() -> Iterator[Callable[[float, float], Exporter]]:
    """Start load-generator exporters (target, achieved); all are stopped after the test."""
    started: list[Exporter] = []

    def start(target: float, achieved: float) -> Exporter:
        started.append(start_exporter(target, achieved))
        return started[-1]

    yield start
    for exporter in started:
        exporter.stop()


@pytest.fixture
def silent_url() -> str:
    """A loopback URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class UseCases:
    """A temporary `use-cases/` root; `add` writes a test scenario into it."""

    root: Path

    def add(
        self, scenario_id: str, alert: str, *, sustained: float = 20, max_clear: float = 30
    ) -> Path:
        """A scenario folder (windows in seconds at time scale 1) whose target is `alert`."""
        return write_scenario(
            self.root, scenario_id, alert, sustained=sustained, max_clear=max_clear
        )


@pytest.fixture
def use_cases(tmp_path: Path) -> UseCases:
    """An empty `use-cases/` root for test scenarios."""
    (tmp_path / "use-cases").mkdir()
    return UseCases(tmp_path / "use-cases")


@dataclass
class Plane:
    """A restartable Prometheus and Alertmanager of one test."""

    home: Path
    prometheus_port: int
    alertmanager_port: int
    processes: dict[str, subprocess.Popen[bytes]]

    @property
    def prometheus(self) -> str:
        """Prometheus's URL."""
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def alertmanager(self) -> str:
        """Alertmanager's URL."""
        return f"http://127.0.0.1:{self.alertmanager_port}"

    def start(self, name: str) -> None:
        """Start `prometheus` or `alertmanager` on its port and wait until it is ready."""
        if name == "prometheus":
            process = launch_prometheus(self.home, self.prometheus_port)
            wait_ready(self.prometheus, process, self.home / "prometheus.log", deadline_s=30)
        else:
            process = launch_alertmanager(self.home, self.alertmanager_port)
            wait_ready(self.alertmanager, process, self.home / "alertmanager.log", deadline_s=30)
        self.processes[name] = process

    def restart(self, name: str) -> None:
        """Stop the server and start it again on the same port (a new start time)."""
        stop_group(self.processes[name])
        self.start(name)

    def reload_prometheus(self) -> None:
        """SIGHUP: Prometheus rereads its config and rules (its lifecycle API is off)."""
        os.kill(self.processes["prometheus"].pid, signal.SIGHUP)


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    """A Prometheus (the conftest rules, two jobs) and an Alertmanager, started for one test."""
    (tmp_path / "rules.yml").write_text(RULES)
    (tmp_path / "prometheus.yml").write_text(CONFIG.format(steady=free_port(), doomed=free_port()))
    running = Plane(tmp_path, free_port(), free_port(), {})
    try:
        running.start("alertmanager")
        running.start("prometheus")
        yield running
    finally:
        for process in running.processes.values():
            stop_group(process)
