"""Issue 3's acceptance on the real bookshelf stack and latency-cache-stampede, at scale 0.1.

One stack is shared by the module and walked through its life in file order: healthy,
a second stack beside it, armed, a known-bad fix, the reference fix. Each test brings
the stack to the state it needs, so any one of them can also run alone.
"""

from __future__ import annotations

import time

import httpx
import psutil
import pytest
from sreforge_deployer import Author, DeployerSettings
from sreforge_deployer._ports import listening_ports
from sreforge_deployer._process import group_members
from sreforge_deployer.local import LocalStack

from .conftest import (
    BOOKSHELF_SCALE,
    PRIMARY_ALERT,
    STAMPEDE,
    WebhookReceiver,
    alert_states,
    alertmanager_has,
    firing_between,
    poll,
    prom_query,
)

pytestmark = pytest.mark.integration

MAINTAINER = Author("Maya Okafor", "maya.okafor@shelfwise.io")
FOR_SECONDS = 30 * BOOKSHELF_SCALE
WINDOW_SECONDS = 30 * BOOKSHELF_SCALE
JOBS = {"bookshelf-api", "bookmeta", "loadgen"}


def _scaled(stack: LocalStack, real_seconds: float) -> float:
    return real_seconds * stack.time_scale


def _all_targets_up(prometheus_url: str) -> bool:
    samples = prom_query(prometheus_url, "up")
    return {s["metric"]["job"] for s in samples if s["value"][1] == "1"} >= JOBS


def _load_held(stack: LocalStack) -> bool:
    text = httpx.get(f"{stack.url('loadgen')}/metrics", timeout=5, trust_env=False).text
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith(("loadgen_target_rps", "loadgen_achieved_rps", "loadgen_paused"))
    }
    return (
        values.get("loadgen_paused") == 0.0
        and values["loadgen_achieved_rps"] >= 0.9 * values["loadgen_target_rps"]
    )


def _observe_not_firing(prometheus_url: str, seconds: float) -> tuple[float, float]:
    """Sample the primary alert every eval interval for `seconds`; fail on any firing sample."""
    start = time.time()
    while time.time() - start < seconds:
        states = alert_states(prometheus_url, PRIMARY_ALERT)
        assert "firing" not in states, f"{PRIMARY_ALERT} fired {time.time() - start:.1f}s in"
        time.sleep(0.5)
    return start, time.time()


@pytest.fixture
def armed(bookshelf: LocalStack) -> LocalStack:
    """The shared stack with the fault delivered and the load on (arms once)."""
    if bookshelf.armed_at is None:
        bookshelf.arm()
    return bookshelf


@pytest.mark.timeout(180)
def test_healthy_stack_is_scraped_and_quiet_under_load(bookshelf: LocalStack) -> None:
    """Healthy: all targets scraped, load on, no primary alert over 3x its `for` window."""
    assert bookshelf.armed_at is None, "run this before arming"
    prom = bookshelf.url("prometheus")
    poll(lambda: _all_targets_up(prom), timeout=10, message="all three jobs scraped up")
    bookshelf.start_load()
    start, end = _observe_not_firing(prom, 3 * FOR_SECONDS + WINDOW_SECONDS)
    assert firing_between(prom, PRIMARY_ALERT, start, end) == []
    assert _load_held(bookshelf), "the healthy window was observed under the full load"


@pytest.mark.timeout(180)
def test_two_stacks_run_side_by_side_and_tear_down_independently(
    bookshelf: LocalStack, settings: DeployerSettings
) -> None:
    """A second stack gets its own ports; tearing it down leaves the first one serving."""
    other = LocalStack(STAMPEDE, time_scale=BOOKSHELF_SCALE, settings=settings)
    other.up()
    try:
        assert not set(other.ports.values()) & set(bookshelf.ports.values())
        assert _all_targets_up(other.url("prometheus"))
        assert _all_targets_up(bookshelf.url("prometheus"))
    finally:
        report = other.down()
    assert report.leftovers == []
    assert not [p for pgid in report.groups.values() for p in group_members(pgid)]
    assert not listening_ports(set(report.ports.values()))
    assert not other.run_dir.exists()
    assert all(group_members(pgid) for pgid in bookshelf.pgids().values())
    api = httpx.get(f"{bookshelf.url('bookshelf-api')}/healthz", timeout=5, trust_env=False)
    assert api.status_code == 200
    prom = bookshelf.url("prometheus")
    poll(
        lambda: (
            all(float(s["value"][1]) < 2.0 for s in prom_query(prom, "time() - timestamp(up)"))
            and _all_targets_up(prom)
        ),
        timeout=10,
        message="the first stack's Prometheus still scrapes everything freshly",
    )


@pytest.mark.timeout(180)
def test_armed_stack_fires_and_pages_the_webhook(
    armed: LocalStack, webhook_receiver: WebhookReceiver
) -> None:
    """Armed under load: the primary alert fires, reaches Alertmanager and the run's webhook."""
    confirm = _scaled(armed, armed.setup.confirm_fire_seconds)
    prom, am = armed.url("prometheus"), armed.url("alertmanager")
    assert armed.workspace is not None
    assert armed.base_commit == armed.workspace.head()
    assert armed.workspace.git("log", "-1", "--format=%an") == "Jonah Lindqvist"
    assert armed.workspace.git("status", "--porcelain") == "", "the agent gets a clean tree"
    poll(
        lambda: "firing" in alert_states(prom, PRIMARY_ALERT),
        timeout=confirm,
        message=f"{PRIMARY_ALERT} firing within the confirm-fire window",
    )
    poll(lambda: alertmanager_has(am, PRIMARY_ALERT), timeout=confirm, message="in Alertmanager")
    poll(
        lambda: webhook_receiver.firing(PRIMARY_ALERT, armed.webhook_route, armed.webhook_token),
        timeout=confirm,
        message="delivered to the run's webhook route with its bearer token",
    )


@pytest.mark.timeout(180)
def test_negative_fix_does_not_clear(armed: LocalStack) -> None:
    """A longer TTL on a still request-scoped cache: after redeploy the alert fires again."""
    assert armed.workspace is not None
    assert armed.base_commit is not None
    armed.workspace.reset_to(armed.base_commit)
    armed.workspace.apply_diff(
        STAMPEDE / "verify" / "negative" / "longer-ttl.patch", "Raise the cache TTL", MAINTAINER
    )
    armed.redeploy()
    deployed = time.time()
    prom = armed.url("prometheus")
    sustained = _scaled(armed, armed.setup.sustained_clear_seconds)
    settled = deployed + WINDOW_SECONDS + FOR_SECONDS
    poll(
        lambda: time.time() > settled and "firing" in alert_states(prom, PRIMARY_ALERT),
        timeout=sustained,
        message="the alert firing again on the new build (the known-bad fix must not clear)",
    )
    assert _load_held(armed)


@pytest.mark.timeout(240)
def test_reference_fix_clears_and_stays_clear_under_load(armed: LocalStack) -> None:
    """The reference fix, redeployed: clears within max-clear, stays clear for the sustain."""
    assert armed.workspace is not None
    assert armed.base_commit is not None
    armed.workspace.reset_to(armed.base_commit)
    armed.workspace.apply_diff(
        STAMPEDE / "solution" / "fix.patch", "Keep the metadata cache per process", MAINTAINER
    )
    armed.redeploy()
    prom = armed.url("prometheus")
    poll(
        lambda: "firing" not in alert_states(prom, PRIMARY_ALERT),
        timeout=_scaled(armed, armed.setup.max_clear_seconds),
        message="the alert clears after the reference fix",
    )
    start, end = _observe_not_firing(prom, _scaled(armed, armed.setup.sustained_clear_seconds))
    assert firing_between(prom, PRIMARY_ALERT, start + 0.5, end) == []
    assert _load_held(armed), "the load stayed on through the sustained window"
    assert all(proc.is_running() for proc in armed.processes())
    assert psutil.pid_exists(armed.pgids()["bookshelf-api"])
