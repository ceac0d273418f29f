"""The local topology's mechanics on a tiny stack: lifecycle, teardown, bad input."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import httpx
import psutil
import pytest
from sreforge_deployer import (
    BinaryMissingError,
    ComponentStartError,
    DeployerSettings,
    PortUnavailableError,
)
from sreforge_deployer._ports import listening_ports
from sreforge_deployer._process import group_members
from sreforge_deployer.local import LocalStack

from .conftest import TINY_SCENARIOS, alert_states, alertmanager_has, poll

pytestmark = pytest.mark.integration


def _nothing_left(stack: LocalStack) -> None:
    """Independently of teardown's own verdict: no group member, no listener, no dir."""
    report = stack.teardown_report
    assert report is not None, "down() ran and reported"
    assert not [proc.pid for pgid in report.groups.values() for proc in group_members(pgid)]
    assert not listening_ports(set(report.ports.values()))
    assert not stack.run_dir.exists()
    assert report.leftovers == []


def test_tiny_stack_up_is_healthy_and_down_leaves_nothing(
    settings: DeployerSettings, webhook_receiver: object
) -> None:
    """Up: every component answers, Prometheus scrapes them; down: no process, port or dir."""
    stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=settings)
    endpoints = stack.up()
    pgids, ports = stack.pgids(), stack.ports
    try:
        assert set(endpoints.agent) == {"prometheus", "alertmanager", "tiny-api"}
        assert set(endpoints.operator) >= set(endpoints.agent) | {"tiny-load", "tiny-upstream"}
        assert len(set(ports.values())) == len(ports) == 5
        assert len(set(pgids.values())) == 5, "each component has its own process group"
        assert all(os.getpgid(pgid) == pgid for pgid in pgids.values())
        assert (stack.run_dir / "stack.json").is_file()
        assert (stack.run_dir / "logs" / "prometheus.log").is_file()
        assert stack.workspace is not None
        assert (stack.run_dir / "data" / "tiny-api.db").read_text() == "seeded"
    finally:
        stack.down()
    _nothing_left(stack)
    assert stack.teardown_report is not None
    assert stack.teardown_report.groups == pgids
    assert stack.teardown_report.ports == ports
    stack.down()  # idempotent


def test_tiny_alert_reaches_alertmanager_and_the_webhook_with_its_token(
    settings: DeployerSettings, webhook_receiver: object, tmp_path: Path
) -> None:
    """Arming starts load; the rule fires in Prometheus, Alertmanager pages the run's route
    with the shared token, read from the run's own copy: the engine home's path (which
    names the harness) never shows in the config the agent can read off Alertmanager."""
    from .conftest import WebhookReceiver

    assert isinstance(webhook_receiver, WebhookReceiver)
    shared = tmp_path / "sreforge-home" / "trigger.token"
    stack = LocalStack(
        TINY_SCENARIOS / "tiny-ok",
        time_scale=0.1,
        settings=settings,
        webhook_url=webhook_receiver.url,
        webhook_token_file=shared,
    )
    stack.up()
    try:
        prom, am = stack.url("prometheus"), stack.url("alertmanager")
        assert alert_states(prom, "TinyLoadRunning") == set()
        stack.arm()
        poll(
            lambda: "firing" in alert_states(prom, "TinyLoadRunning"),
            timeout=20,
            message="TinyLoadRunning firing in Prometheus",
        )
        poll(lambda: alertmanager_has(am, "TinyLoadRunning"), timeout=10, message="in Alertmanager")
        poll(
            lambda: webhook_receiver.firing(
                "TinyLoadRunning", stack.webhook_route, stack.webhook_token
            ),
            timeout=10,
            message="webhook delivery on the run's route with its bearer token",
        )
        token_file = stack.run_dir / "observability" / "webhook.token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        assert token_file.read_text().strip() == shared.read_text().strip()
        status = httpx.get(f"{am}/api/v2/status", timeout=5).text
        assert str(token_file) in status, "Alertmanager reads the run's copy"
        assert "sreforge-home" not in status, "the engine home shows in Alertmanager's config"
    finally:
        stack.down()


def test_crashing_component_names_itself_and_its_log(settings: DeployerSettings) -> None:
    """A component that exits on start: error names it, its log and tail; nothing orphaned."""
    stack = LocalStack(TINY_SCENARIOS / "tiny-crash", time_scale=0.1, settings=settings)
    with pytest.raises(ComponentStartError) as caught:
        stack.up()
    message = str(caught.value)
    assert "'tiny-load'" in message
    assert "exited with code 3" in message
    assert "tiny-load.log" in message
    assert "fatal: cannot open /etc/tiny/load.conf" in message
    _nothing_left(stack)
    assert stack.teardown_report is not None
    assert {"tiny-upstream", "tiny-api", "tiny-load"} <= set(stack.teardown_report.groups)


def test_missing_prometheus_binary_is_named_before_anything_starts(
    settings: DeployerSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With prometheus off PATH, up() fails naming it and leaves no dir or process."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "prometheus-alertmanager"):
        real = next(
            Path(d) / tool for d in os.environ["PATH"].split(":") if (Path(d) / tool).exists()
        )
        (bin_dir / tool).symlink_to(real)
    monkeypatch.setenv("PATH", str(bin_dir))
    stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=settings)
    with pytest.raises(BinaryMissingError, match=r"'prometheus'.*not found on PATH"):
        stack.up()
    assert not stack.run_dir.exists()
    assert stack.teardown_report is None, "nothing was started, so nothing to tear down"


def test_port_taken_before_start_names_component_and_cleans_up(
    settings: DeployerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If a leased port is taken before its component binds it, up() says which and where."""
    stack = LocalStack(TINY_SCENARIOS / "tiny-ok", time_scale=0.1, settings=settings)
    squatter = socket.socket()
    original = stack._lease_ports

    def lease_then_squat() -> None:
        original()
        squatter.bind(("127.0.0.1", stack.ports["tiny-api"]))
        squatter.listen()

    monkeypatch.setattr(stack, "_lease_ports", lease_then_squat)
    try:
        with pytest.raises(PortUnavailableError, match=r"'tiny-api': port 127\.0\.0\.1:\d+ is"):
            stack.up()
    finally:
        squatter.close()
    _nothing_left(stack)
    assert stack.teardown_report is not None
    assert "tiny-upstream" in stack.teardown_report.groups, "earlier components were stopped"


def test_runtime_notrace_arms_through_the_environment_only(
    settings: DeployerSettings, tmp_path: Path
) -> None:
    """arm-runtime-notrace: the service restarts with the env switch, and keeps it on a
    redeploy; git history is untouched."""
    root = tmp_path / "uc"
    shutil.copytree(TINY_SCENARIOS.parent, root)
    env_file = root / "scenarios" / "tiny-ok" / "environment" / "scenario.env"
    env_file.write_text(
        "DELIVERY_MODE=arm-runtime-notrace\nRUNTIME_ENV_VAR=TINY_MODE\nRUNTIME_ENV_VALUE=slow\n"
        "READINESS_GATE=off\nLOAD_PROFILE=steady\nLOAD_RATE=5\n"
    )
    stack = LocalStack(root / "scenarios" / "tiny-ok", time_scale=0.1, settings=settings)
    stack.up()
    try:
        assert stack.workspace is not None
        head = stack.workspace.head()
        before = stack.pgids()["tiny-api"]
        assert "TINY_MODE" not in psutil.Process(before).environ()
        assert stack.arm() == head, "no commit: the fault leaves no trace in the repo"
        after = stack.pgids()["tiny-api"]
        assert after != before, "the service was restarted to pick the switch up"
        assert psutil.Process(after).environ()["TINY_MODE"] == "slow"
        assert stack.workspace.git("status", "--porcelain") == ""
        stack.redeploy()
        redeployed = stack.pgids()["tiny-api"]
        assert redeployed != after
        assert psutil.Process(redeployed).environ()["TINY_MODE"] == "slow", (
            "the override outlives the agent's redeploy: only a code change can mitigate"
        )
    finally:
        stack.down()
    _nothing_left(stack)
