"""The compose topology against a real Docker engine: a run's stack as a Compose project.

up → arm → redeploy → down of the latency-cache-stampede stack at time scale 0.1: the
operator's published endpoints answer, the alert reaches a host-side webhook through the
relay, the service's container sees no scenario or engine home and reaches only its
upstream (nothing of the host), a container on the `agent` network only the page's
endpoints, a provider adopts the stack once its holder is gone, the redeploy swaps the
service's container behind the readiness gate, and the teardown leaves no container,
network or volume of the project (nor its run dir or ports). Skipped visibly without an
engine.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_project import project_name
from sreforge_deployer._compose_stack import ComposeStack
from sreforge_deployer._compose_state import ComposeRecord
from sreforge_deployer._compose_topology import (
    ComposeTopologies,
    ComposeTopology,
    PerRunTopologies,
)
from sreforge_deployer._errors import StackLostError
from sreforge_deployer._ports import listening_ports
from sreforge_deployer.local import LocalTopologies

from .conftest import BOOKSHELF_SCALE, PRIMARY_ALERT, STAMPEDE, WebhookReceiver, poll

pytestmark = pytest.mark.docker


@pytest.fixture
def compose_stack(
    stack_image_inputs: None, settings: DeployerSettings, webhook_receiver: WebhookReceiver
) -> Iterator[ComposeStack]:
    """A compose stack, not started; whatever a test leaves of it is removed afterwards."""
    stack = ComposeStack(
        STAMPEDE, time_scale=BOOKSHELF_SCALE, settings=settings, webhook_url=webhook_receiver.url
    )
    yield stack
    stack.down()


def _container_of(stack: ComposeStack, service: str) -> str:
    command = ["docker", "compose", "-p", stack.project.name, "ps", "-q", service]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def _sees(container: str, path: Path) -> bool:
    probe = ["docker", "exec", container, "test", "-e", str(path)]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


_DIAL = """
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor

def dial(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return "accepted"
    except ConnectionRefusedError:
        return "refused"  # a reset came back: reached, nothing listens
    except OSError:
        return "blocked"  # no route, dropped, or no such name

with ThreadPoolExecutor(len(sys.argv) - 1) as pool:
    print(json.dumps(dict(zip(sys.argv[1:], pool.map(dial, sys.argv[1:])))))
"""


def _dial(container: str | None, targets: list[str]) -> dict[str, str]:
    """Each `host:port` dialled at once from `container` (the host when None): `accepted`,
    `refused` (reached, nothing listens) or `blocked` (no route, dropped, no such name)."""
    probe = ["python3", "-I", "-c", _DIAL, *targets]
    if container is not None:
        probe = ["docker", "exec", container, *probe]
    done = subprocess.run(probe, capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, f"the probe itself failed ({done.returncode}): {done.stderr}"
    answers: dict[str, str] = json.loads(done.stdout)
    return answers


def _addresses(container: str) -> list[str]:
    template = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    command = ["docker", "inspect", "-f", template, container]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()


def _default_gateway() -> str:
    """The host's own next hop: outside the host, and answering the host."""
    with open("/proc/net/route") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == "00000000":
                return ".".join(str(b) for b in reversed(bytes.fromhex(fields[2])))
    pytest.skip("the host has no default route to probe the outside with")


@contextlib.contextmanager
def _host_listener() -> Iterator[list[str]]:
    """A host listener on every address, as `host:port` at each of the host's own
    non-loopback IPv4 addresses (its bridges' included): no agent code may reach one."""
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
        yield [
            f"{address.address}:{port}"
            for addresses in psutil.net_if_addrs().values()
            for address in addresses
            if address.family == socket.AF_INET and not address.address.startswith("127.")
        ]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=3, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.timeout(300)
def test_up_arm_redeploy_down_leaves_nothing_of_the_project(
    compose_stack: ComposeStack, settings: DeployerSettings, webhook_receiver: WebhookReceiver
) -> None:
    """The whole life of a compose stack, with its endpoints, networks, page path and
    cleanup checked; redeployed and torn down by a provider that adopted it after its
    holder was gone (one boot for both: each costs a whole stack)."""
    stack = compose_stack
    endpoints = stack.up()
    health = {"prometheus": "/-/ready", "alertmanager": "/-/ready"}
    for name, url in endpoints.operator.items():
        assert url.startswith("http://127.0.0.1:"), f"{name} published off loopback: {url}"
        assert _answers(f"{url}{health.get(name, '/healthz')}"), f"{name} does not answer"
    assert stack.network_endpoints["prometheus"] == "http://prometheus:9090"

    service = _container_of(stack, "bookshelf-api")
    assert _sees(service, stack.run_dir / "workspace"), "the probe cannot tell"
    for hidden in (STAMPEDE / "solution", STAMPEDE / "verify", settings.engine_home):
        assert not _sees(service, hidden), f"the service's container sees {hidden}"
    _assert_the_service_reaches_only_its_upstream(stack, service)
    _assert_an_agent_box_reaches_only_its_page(stack)

    stack.arm()
    poll(
        lambda: webhook_receiver.firing(PRIMARY_ALERT, stack.webhook_route, stack.webhook_token),
        timeout=120,
        message="the primary alert never reached the host-side webhook through the relay",
    )

    adopted = _adopted_after_its_holder_is_gone(stack, settings, webhook_receiver)
    assert adopted.up().operator_endpoints == endpoints.operator, "adopted on other ports"
    assert adopted.arm().base_commit == stack.base_commit, "the recorded arm did not come back"

    adopted.redeploy()
    swapped = _container_of(stack, "bookshelf-api")
    assert swapped, "no service container after the redeploy"
    assert swapped != service, "the redeploy did not swap the service's container"
    assert _answers(f"{endpoints.operator['bookshelf-api']}/healthz")
    rate = httpx.get(f"{endpoints.operator['loadgen']}/metrics", timeout=3, trust_env=False)
    assert rate.status_code == 200, "the load generator did not survive the gate"

    ports = {int(url.rsplit(":", 1)[1]) for url in endpoints.operator.values()}
    assert adopted.down() == []
    assert stack.project.leftovers() == []
    assert not stack.run_dir.exists()
    assert not listening_ports(ports), "published ports still listening"


def _adopted_after_its_holder_is_gone(
    stack: ComposeStack, settings: DeployerSettings, webhook_receiver: WebhookReceiver
) -> ComposeTopology:
    """Drop the stack's leases (as its dead holder's exit would) and adopt it afresh from
    `compose.json`, as a restarted deployer's provider does."""
    for lease in [*stack._leases.values(), *filter(None, [stack._relay_lease])]:
        lease.release()
    restarted = settings.model_copy(update={"alert_webhook_base": webhook_receiver.url})
    adopted = ComposeTopologies(LocalTopologies(restarted)).adopt(stack.run_id)
    assert adopted.adopted
    return adopted


def _assert_the_service_reaches_only_its_upstream(stack: ComposeStack, service: str) -> None:
    """From the service's container: its declared upstream answers; the load generator,
    Alertmanager, Prometheus and the gateway do not, by name or by any of their addresses;
    neither does the host's next hop, which the host itself reaches, nor a listener at any
    of the host's own addresses (`app` has no host address). The gateway, on `app` too,
    may answer with a reset but relays nothing there."""
    outside = f"{_default_gateway()}:80"
    if _dial(None, [outside])[outside] == "blocked":
        pytest.skip(f"the host itself gets no answer from {outside}")
    harness = [
        f"{target}:{port}"
        for name, port in (("loadgen", 8080), ("alertmanager", 9093), ("prometheus", 9090))
        for target in (name, *_addresses(_container_of(stack, name)))
    ]
    leases = [int(url.rsplit(":", 1)[1]) for url in stack.endpoints.operator.values()]
    gateway = [  # on `app` too: it may reset, never relay
        f"{address}:{port}"
        for address in _addresses(_container_of(stack, "gateway"))
        for port in (8080, *leases)
    ]
    with _host_listener() as host:
        assert _dial(None, host) == dict.fromkeys(host, "accepted"), "the listener cannot tell"
        answers = _dial(service, ["bookmeta:8080", outside, *harness, *gateway, *host])
    assert answers.pop("bookmeta:8080") == "accepted", "the probe cannot tell"
    reached_host = [target for target in host if answers.pop(target) != "blocked"]
    assert not reached_host, f"the service reaches host listeners at {reached_host}"
    assert answers.pop(outside) == "blocked", f"the service reaches {outside} outside the host"
    reached = [target for target in harness if answers[target] != "blocked"]
    assert not reached, f"the service reaches the harness at {reached}"
    relayed = [target for target in gateway if answers[target] == "accepted"]
    assert not relayed, f"the gateway relays the service to {relayed}"


def _assert_an_agent_box_reaches_only_its_page(stack: ComposeStack) -> None:
    """A container on the run's `agent` network (no capabilities, as an in-box session):
    the app, Prometheus and Alertmanager answer by the page's names; the load generator
    and the upstream do not, by name or by address, nor does the outside or a listener
    at any of the host's own addresses."""
    image = _image_of(_container_of(stack, "gateway"))
    command = ["docker", "run", "-d", "--rm", "--network", stack.agent_network]
    command += ["--cap-drop", "ALL", "--user", "65534:65534", image, "sleep", "60"]
    box = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    try:
        outside = f"{_default_gateway()}:80"
        page = ["bookshelf-api:8080", "prometheus:9090", "alertmanager:9093"]
        hidden = [
            f"{target}:8080"
            for name in ("loadgen", "bookmeta")
            for target in (name, *_addresses(_container_of(stack, name)))
        ]
        with _host_listener() as host:
            answers = _dial(box, [*page, *hidden, outside, *host])
        assert all(answers[target] == "accepted" for target in page), answers
        shut = [*hidden, outside, *host]
        reached = [target for target in shut if answers[target] != "blocked"]
        assert not reached, f"the agent's box reaches {reached}"
    finally:
        subprocess.run(["docker", "rm", "-f", box], capture_output=True, check=False)


def _image_of(container: str) -> str:
    command = ["docker", "inspect", "-f", "{{.Config.Image}}", container]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.timeout(240)
def test_a_stack_this_process_does_not_hold_is_torn_down_from_its_state_file(
    compose_stack: ComposeStack, settings: DeployerSettings
) -> None:
    """`down_elsewhere` finds the project by the run dir's state file and removes all of it;
    `leftovers` then reports nothing, and the provider picks compose for that run."""
    stack = compose_stack
    stack.up()
    provider = PerRunTopologies(
        LocalTopologies(settings), ComposeTopologies(LocalTopologies(settings))
    )
    assert provider.leftovers(stack.run_id), "a running project is something left"
    assert provider.down_elsewhere(stack.run_id) == []
    assert stack.project.leftovers() == []
    assert not stack.run_dir.exists()
    assert provider.compose.leftovers(stack.run_id) == []


def test_a_project_whose_boot_did_not_finish_is_not_adopted(settings: DeployerSettings) -> None:
    """`compose.json` without `booted` (the deployer died mid-boot): `StackLostError`, so
    the saga clears it and boots again."""
    run_dir = settings.runs_root / "half-booted"
    run_dir.mkdir(parents=True)
    record = ComposeRecord(
        run_id="half-booted",
        project=project_name("half-booted"),
        run_dir=run_dir,
        owner_pid=2**22 + 1,  # no such process
        scenario_id="latency-cache-stampede",
    )
    record.write()
    with pytest.raises(StackLostError, match="boot did not finish"):
        ComposeTopologies(LocalTopologies(settings)).adopt("half-booted")
