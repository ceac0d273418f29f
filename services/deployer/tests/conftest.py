"""Shared fixtures: settings in a temp root, a webhook receiver, polling, stacks."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sreforge_deployer import DeployerSettings, Workspace
from sreforge_deployer._spec import DeliveryMode, ScenarioSetup
from sreforge_deployer.local import LocalStack

FIXTURES = Path(__file__).parent / "fixtures"
TINY_SCENARIOS = FIXTURES / "tiny" / "scenarios"
REPO_ROOT = Path(__file__).resolve().parents[3]
BOOKSHELF = REPO_ROOT / "use-cases" / "bookshelf"
STAMPEDE = BOOKSHELF / "scenarios" / "latency-cache-stampede"
BOOKSHELF_APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
PRIMARY_ALERT = "BookshelfApiLatencyP99High"
BOOKSHELF_SCALE = 0.1
T = TypeVar("T")
# The fixture repos' own tests run only inside the CI gate's checkouts.
collect_ignore_glob = ["fixtures/*"]


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two `git format-patch` mboxes on the bookshelf app: an old feature, then an innocent
    recent change."""
    scratch = tmp_path_factory.mktemp("series")
    workspace = Workspace.build(BOOKSHELF_APP, scratch / "repo")
    author = {
        "GIT_AUTHOR_NAME": "Priya Raman",
        "GIT_AUTHOR_EMAIL": "priya.raman@shelfwise.io",
        "GIT_COMMITTER_NAME": "Priya Raman",
        "GIT_COMMITTER_EMAIL": "priya.raman@shelfwise.io",
    }
    for name, line, message in [
        ("config.py", "MAX_INFLIGHT = 0", "Add an in-flight limit setting"),
        ("validation.py", "MIN_QUERY_LENGTH = 1", "Name the minimum query length"),
    ]:
        target = workspace.path / "bookshelf" / name
        target.write_text(target.read_text() + f"\n{line}\n")
        workspace.git("commit", "-qam", message, env=author)
    out = scratch / "out"
    workspace.git("format-patch", "-q", "-2", "-o", str(out))
    return sorted(out.glob("*.patch"))


def scenario_setup(mode: DeliveryMode, patches: list[Path], tmp_path: Path) -> ScenarioSetup:
    """A scenario's setup delivering `patches` by `mode` (arm-runtime-notrace: with an
    in-flight limit override), for delivery tests without a scenario folder."""
    runtime = {"BOOKSHELF_MAX_INFLIGHT": "0"} if mode == "arm-runtime-notrace" else {}
    return ScenarioSetup(
        scenario_id="s",
        directory=tmp_path,
        stack_dir=tmp_path,
        delivery_mode=mode,
        runtime_env=runtime,
        load_profile="search-storm",
        load_rate="20",
        inject_patches=patches,
    )


def poll(
    probe: Callable[[], T | None], *, timeout: float, message: str, interval: float = 0.2
) -> T:
    """Call `probe` until it returns something truthy; fail with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"{message} (not within {timeout:g}s; last probe: {last!r})")


@dataclass
class Delivery:
    """One webhook POST Alertmanager made."""

    path: str
    authorization: str
    body: dict[str, Any]


@dataclass
class WebhookReceiver:
    """A small HTTP receiver that records every POST it gets."""

    url: str
    deliveries: list[Delivery] = field(default_factory=list)

    def firing(self, alert: str, route: str, token: str) -> list[Delivery]:
        """Deliveries on `route`, with `token`, carrying `alert` in state firing."""
        return [
            d
            for d in list(self.deliveries)
            if d.path.rstrip("/").endswith(route)
            and d.authorization == f"Bearer {token}"
            and any(
                a.get("labels", {}).get("alertname") == alert and a.get("status") == "firing"
                for a in d.body.get("alerts", [])
            )
        ]


@pytest.fixture(scope="session")
def webhook_receiver() -> Iterator[WebhookReceiver]:
    """A webhook endpoint on a kernel-chosen loopback port for the whole session."""
    receiver = WebhookReceiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            auth = self.headers.get("Authorization", "")
            receiver.deliveries.append(Delivery(self.path, auth, body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this session's stacks put their run dirs."""
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def settings(runs_root: Path) -> DeployerSettings:
    """Deployer settings pointed at the session's runs root."""
    return DeployerSettings(runs_root=runs_root)


def alert_states(prometheus_url: str, alert: str) -> set[str]:
    """States (`pending`/`firing`) of `alert` in Prometheus right now (empty = inactive)."""
    response = httpx.get(f"{prometheus_url}/api/v1/alerts", timeout=5, trust_env=False)
    alerts = response.json()["data"]["alerts"]
    return {a["state"] for a in alerts if a["labels"].get("alertname") == alert}


def alertmanager_has(alertmanager_url: str, alert: str) -> bool:
    """Whether Alertmanager holds `alert` as an active alert."""
    response = httpx.get(
        f"{alertmanager_url}/api/v2/alerts", params={"active": "true"}, timeout=5, trust_env=False
    )
    return any(a["labels"].get("alertname") == alert for a in response.json())


def prom_query(prometheus_url: str, query: str) -> list[dict[str, Any]]:
    """An instant PromQL query's result vector."""
    response = httpx.get(
        f"{prometheus_url}/api/v1/query", params={"query": query}, timeout=5, trust_env=False
    )
    result: list[dict[str, Any]] = response.json()["data"]["result"]
    return result


def firing_between(prometheus_url: str, alert: str, start: float, end: float) -> list[float]:
    """Timestamps at which Prometheus recorded `alert` firing in [start, end] (ALERTS series)."""
    response = httpx.get(
        f"{prometheus_url}/api/v1/query_range",
        params={
            "query": f'ALERTS{{alertname="{alert}",alertstate="firing"}}',
            "start": start,
            "end": end,
            "step": "0.5",
        },
        timeout=10,
        trust_env=False,
    )
    series = response.json()["data"]["result"]
    return [float(ts) for s in series for ts, _ in s["values"]]


@pytest.fixture(scope="module")
def bookshelf(
    settings: DeployerSettings, webhook_receiver: WebhookReceiver
) -> Iterator[LocalStack]:
    """One real latency-cache-stampede stack at time_scale 0.1, shared by a test module."""
    stack = LocalStack(
        STAMPEDE, time_scale=BOOKSHELF_SCALE, settings=settings, webhook_url=webhook_receiver.url
    )
    stack.up()
    try:
        yield stack
    finally:
        report = stack.down()
        assert report.leftovers == []
