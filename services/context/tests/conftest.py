"""Fixtures for the context service's tests: a scenario root, git workspaces, run states."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sreforge_contracts import RunState, RunWorkspace, StackInfo

FIXTURES = Path(__file__).parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[3]
BOOKSHELF = REPO_ROOT / "use-cases" / "bookshelf"
BOOKSHELF_APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
BOOKSHELF_SCENARIO = BOOKSHELF / "scenarios" / "latency-cache-stampede"
FIRED_AT = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)

GitRepo = Callable[..., Path]


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in `repo` with a neutral identity; a failure shows git's message."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    identity = {
        "GIT_AUTHOR_NAME": "Ada Brandt",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada Brandt",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**base, **identity, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed in {repo}:\n{done.stderr}"
    return done.stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    """Make a committed git repo from {relative path: text}; returns its path."""

    def make(files: dict[str, str], name: str = "workspace") -> Path:
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        for relative, text in files.items():
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            (repo / relative).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "Initial import")
        return repo

    return make


@pytest.fixture
def clean_files() -> dict[str, str]:
    """A tiny app tree that reads like a product."""
    return {
        "README.md": "# Shop API\n\nCheckout and cart endpoints. Defaults live in config.py.\n",
        "shop/app.py": "def checkout(cart):\n    return sum(item.price for item in cart)\n",
        "shop/config.py": "DEFAULT_TIMEOUT = 2.0  # seconds; resolution of the retry timer\n",
        "tests/test_app.py": "def test_checkout_sums_prices():\n    assert True\n",
    }


@pytest.fixture
def use_cases(tmp_path: Path) -> Path:
    """A use-cases root holding the test scenario `checkout-slow`."""
    root = tmp_path / "use-cases"
    shutil.copytree(FIXTURES, root)
    return root


def run_state(workspace: Path, run_id: str = "run-ctx-1", phase: str = "triggered") -> RunState:
    """A triggered run of `checkout-slow` whose stack has a workspace at `workspace`."""
    return RunState.model_validate(
        {
            "run_id": run_id,
            "scenario_id": "checkout-slow",
            "agent": "noop",
            "time_scale": 0.1,
            "alert_route": "r0ute",
            "expected_alert": "ShopCheckoutLatencyHigh",
            "phase": phase,
            "alert_fired_at": FIRED_AT,
            "stack": StackInfo(
                stack="shop-local",
                run_dir=str(workspace.parent),
                agent_endpoints={
                    "prometheus": "http://127.0.0.1:20001",
                    "alertmanager": "http://127.0.0.1:20002",
                    "shop-api": "http://127.0.0.1:20003",
                },
                operator_endpoints={"prometheus": "http://127.0.0.1:20001"},
                run_workspace=RunWorkspace(path=str(workspace), service="shop-api"),
            ),
        }
    )


@pytest.fixture
def make_state() -> Callable[..., RunState]:
    """`run_state` as a fixture: (workspace, run_id=…, phase=…) → RunState."""
    return run_state


@pytest.fixture
def bookshelf_workspace(tmp_path: Path) -> Path:
    """The real bookshelf workspace (history + the delivered fault), as the deployer builds it.

    Skipped when the bookshelf app, its scenario or the deployer's workspace builder is
    not there yet.
    """
    deployer = pytest.importorskip("sreforge_deployer")
    inject = sorted((BOOKSHELF_SCENARIO / "inject").glob("*.patch"))
    if not BOOKSHELF_APP.is_dir() or not inject:
        pytest.skip("the bookshelf app or its scenario's inject patches are not present")
    workspace = deployer.Workspace.build(BOOKSHELF_APP, tmp_path / "bookshelf-ws")
    workspace.deliver_recent(inject)
    return Path(workspace.path)


@pytest.fixture
def run_git() -> Callable[..., str]:
    """`git` as a fixture: (repo, *args, env=…) → stdout."""
    return git


@dataclass
class FakeApp:
    """A real loopback HTTP server playing an app: a `Server:` banner and bodies by path."""

    url: str
    server_version: str
    bodies: dict[str, str]


@pytest.fixture
def http_app() -> Iterator[Callable[..., str]]:
    """Start loopback HTTP servers: (server_version, {path: body}) → its URL; stopped after."""
    servers: list[ThreadingHTTPServer] = []

    def start(server_version: str = "gunicorn", bodies: dict[str, str] | None = None) -> str:
        app = FakeApp("", server_version, bodies or {"/": "ok\n"})

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = app.bodies.get(self.path)
                data = (body if body is not None else "not found\n").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def version_string(self) -> str:
                return app.server_version

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        app.url = f"http://127.0.0.1:{server.server_address[1]}"
        return app.url

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


PLANTED_PROMETHEUS_CONFIG = """\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [rules.yml]
scrape_configs:
  - job_name: shop-api
    static_configs:
      - targets: ["127.0.0.1:{port}"]
        labels: {{team: fault-drills}}
"""
PLANTED_PROMETHEUS_RULES = """\
groups:
  - name: shop
    rules:
      - alert: ShopCheckoutLatencyHigh
        expr: vector(1) > 0
        labels: {service: shop-api}
        annotations: {summary: "watched by the oracle"}
"""


@pytest.fixture
def planted_prometheus(tmp_path: Path) -> Iterator[str]:
    """A real Prometheus whose target carries a `team: fault-drills` label and whose rule
    carries an annotation naming the oracle; yields its URL once ready."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is missing (apt install prometheus)")
    home = tmp_path / "prometheus"
    home.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (home / "prometheus.yml").write_text(PLANTED_PROMETHEUS_CONFIG.format(port=port))
    (home / "rules.yml").write_text(PLANTED_PROMETHEUS_RULES)
    log = (home / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"{url}/-/ready", process, home / "prometheus.log")
        _wait_ready(f"{url}/api/v1/targets", process, home / "prometheus.log", needle="fault")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, needle: str = "") -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200 and needle.encode() in response.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{url} did not answer {needle!r} within 30s: {log.read_text()[-2000:]}")
