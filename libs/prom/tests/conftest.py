"""A real Prometheus for the client's tests: 100 ms scrape and evaluation, one test rule."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

CONFIG = """\
global:
  scrape_interval: 100ms
  scrape_timeout: 100ms
  evaluation_interval: 100ms
rule_files: [rules.yml]
scrape_configs:
  - job_name: self
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""

RULES = """\
groups:
  - name: prom-client-test
    interval: 100ms
    rules:
      - alert: AlwaysPending
        expr: vector(1) > 0
        for: 1h
        labels: {severity: page}
        annotations: {summary: never fires}
      - record: test:one
        expr: vector(1)
"""


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus scraping itself, with `RULES` loaded; its base URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is missing (apt install prometheus)")
    home = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    (home / "prometheus.yml").write_text(CONFIG.format(port=port))
    (home / "rules.yml").write_text(RULES)
    log = home / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
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
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        _stop(process)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    pytest.fail(f"prometheus not ready at {url} within 30 s: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
