"""The compose topology's document for one run (pure: a run's description in, a dict out),
and the per-run choice of topology."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sreforge_contracts import RunRequested
from sreforge_deployer import DeployerSettings
from sreforge_deployer._compose_file import (
    RELAY_SERVICE,
    ComposeRun,
    WebhookRelay,
    compose_document,
    network_url,
    template_values,
)
from sreforge_deployer._compose_image import RELAY, StackImage
from sreforge_deployer._compose_networks import (
    AGENT_NETWORK,
    APP_NETWORK,
    EDGE_NETWORK,
    GATEWAY,
    HARNESS_NETWORK,
)
from sreforge_deployer._compose_project import gateway_of, project_name
from sreforge_deployer._compose_topology import ComposeTopologies, PerRunTopologies
from sreforge_deployer._errors import DeployerError
from sreforge_deployer._render import RenderedObservability
from sreforge_deployer._spec import load_scenario_setup, load_stack_spec
from sreforge_deployer.local import LocalTopologies

from .conftest import STAMPEDE

RUN_DIR = Path("/runs/r1")
PORTS = {
    "bookmeta": 20001,
    "bookshelf-api": 20002,
    "loadgen": 20003,
    "alertmanager": 20004,
    "prometheus": 20005,
}


def _run(**changes: Any) -> ComposeRun:
    setup = load_scenario_setup(STAMPEDE)
    obs = RUN_DIR / "observability"
    rendered = RenderedObservability(
        obs / "prometheus.yml", obs / "rules.yml", obs / "alertmanager.yml", "1s", "1s", "3s", "6s"
    )
    fields: dict[str, Any] = {
        "project": project_name("r1"),
        "image": "local/sreforge-stack:abc",
        "spec": load_stack_spec(setup.stack_dir),
        "setup": setup,
        "run_dir": RUN_DIR,
        "host_ports": PORTS,
        "time_scale": 0.1,
        "user": "1000:1000",
        "rendered": rendered,
    }
    return ComposeRun(**{**fields, **changes})


def test_every_component_the_observability_pair_and_the_gateway_are_services() -> None:
    """App, upstream, load, Prometheus, Alertmanager, the gateway; no relay without a webhook."""
    document = compose_document(_run())
    services = document["services"]
    assert set(services) == {
        *("bookmeta", "bookshelf-api", "loadgen", "prometheus", "alertmanager", GATEWAY)
    }
    assert document["name"] == project_name("r1")
    assert all(service["init"] is True for service in services.values()), "PID 1 gets SIGTERM"


def test_the_service_shares_a_network_only_with_what_it_reaches() -> None:
    """`app` holds the service, its declared upstream and the gateway; the load generator,
    Prometheus and Alertmanager are on `harness`, which the service is not on."""
    document = compose_document(_run())
    services = document["services"]
    members = {
        network: {name for name, service in services.items() if network in service["networks"]}
        for network in document["networks"]
    }
    assert members == {
        APP_NETWORK: {"bookshelf-api", "bookmeta", GATEWAY},
        HARNESS_NETWORK: {"bookmeta", "loadgen", "prometheus", "alertmanager", GATEWAY},
        AGENT_NETWORK: {GATEWAY},
        EDGE_NETWORK: {GATEWAY},
    }
    for internal in (APP_NETWORK, HARNESS_NETWORK, AGENT_NETWORK):
        assert document["networks"][internal]["internal"] is True
    for agents_code in (APP_NETWORK, AGENT_NETWORK):  # no host address where it runs
        options = document["networks"][agents_code]["driver_opts"]
        assert options["com.docker.network.bridge.inhibit_ipv4"] == "true", agents_code
    edge = document["networks"][EDGE_NETWORK]["driver_opts"]
    assert edge["com.docker.network.bridge.enable_ip_masquerade"] == "false"


def test_the_gateway_carries_the_service_name_to_the_harness_and_listens_on_its_own() -> None:
    """Load and Prometheus dial `bookshelf-api` on `harness` and land on the gateway, which
    listens there (and on `edge`) by an alias only it has, never on `app`."""
    gateway = compose_document(_run())["services"][GATEWAY]
    assert "bookshelf-api" in gateway["networks"][HARNESS_NETWORK]["aliases"]
    command = gateway["command"]
    specs = command[command.index(RELAY) + 1 : command.index("--")]
    listens = {spec.split("=")[0].split(":")[1] for spec in specs}
    assert listens == {"gateway-on-harness", "gateway-on-edge", "gateway-on-agent"}
    assert "tcp:gateway-on-harness:8080=tcp:real-bookshelf-api:8080" in specs
    assert gateway["cap_drop"] == ["ALL"]


def test_an_in_box_agent_finds_the_page_by_name_and_not_the_load_or_the_upstream() -> None:
    """On `agent` the gateway answers to the app's, Prometheus' and Alertmanager's names
    and relays exactly those; the load generator and the upstream are not there."""
    gateway = compose_document(_run())["services"][GATEWAY]
    aliases = set(gateway["networks"][AGENT_NETWORK]["aliases"])
    assert aliases == {"bookshelf-api", "prometheus", "alertmanager", "gateway-on-agent"}
    relayed = [spec for spec in gateway["command"] if spec.startswith("tcp:gateway-on-agent:")]
    assert sorted(relayed) == [
        "tcp:gateway-on-agent:8080=tcp:real-bookshelf-api:8080",
        "tcp:gateway-on-agent:9090=tcp:real-prometheus:9090",
        "tcp:gateway-on-agent:9093=tcp:real-alertmanager:9093",
    ]


def test_ports_are_published_on_loopback_only_by_the_gateway() -> None:
    """The operator reaches each component on 127.0.0.1:<lease> through the gateway; no
    other container publishes anything (internal networks cannot)."""
    services = compose_document(_run())["services"]
    gateway = services.pop(GATEWAY)
    assert not [name for name, service in services.items() if "ports" in service]
    assert sorted(gateway["ports"]) == sorted(f"127.0.0.1:{p}:{p}" for p in PORTS.values())
    for name, lease in PORTS.items():
        target = f"tcp:real-{name}:{network_url(name).rsplit(':', 1)[1]}"
        assert f"tcp:gateway-on-edge:{lease}={target}" in gateway["command"]


def test_the_service_sees_only_its_workspace_read_only_and_the_run_data() -> None:
    """The agent's code: no stack folder, no scenario (solution/, verify/), no engine home."""
    service = compose_document(_run())["services"]["bookshelf-api"]
    assert service["volumes"] == [
        f"{RUN_DIR}/workspace:{RUN_DIR}/workspace:ro",
        f"{RUN_DIR}/data:{RUN_DIR}/data",
    ]
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]
    assert service["working_dir"] == f"{RUN_DIR}/workspace"
    assert "network_mode" not in service
    assert "extra_hosts" not in service


def test_the_service_container_has_the_scenario_memory_limit() -> None:
    """The container's memory limit is the scenario's SERVICE_MEMORY_LIMIT_MB (over the
    stack's `memory_limit_mb`, unset for bookshelf), with no swap past it; others and
    scenarios that ask for none are unlimited."""
    services = compose_document(_run())["services"]
    assert "mem_limit" not in services["bookshelf-api"]
    assert "mem_limit" not in services["loadgen"]
    leak = load_scenario_setup(STAMPEDE.parent / "memory-leak-restarts")
    sized = compose_document(_run(setup=leak))["services"]["bookshelf-api"]
    assert sized["mem_limit"] == sized["memswap_limit"] == "192m"


def test_components_listen_on_their_container_and_dial_by_name() -> None:
    """Placeholders take the in-network view: `{host}` is every address, URLs use names."""
    services = compose_document(_run())["services"]
    app = services["bookshelf-api"]
    assert app["environment"]["GUNICORN_CMD_ARGS"] == "--bind 0.0.0.0:8080"
    assert app["environment"]["BOOKSHELF_UPSTREAM_URL"] == "http://bookmeta:8080"
    load = services["loadgen"]["command"]
    assert load[load.index("--target") + 1] == "http://bookshelf-api:8080"
    assert load[-1] == "--paused", "load starts only when the run arms"
    prometheus = services["prometheus"]["command"]
    assert "--web.listen-address=0.0.0.0:9090" in prometheus


def test_durations_are_time_scaled_and_the_runtime_env_reaches_only_the_service() -> None:
    """The cache TTL keeps its relation to the windows; a runtime fault is the service's."""
    services = compose_document(_run(runtime_env={"FAULT": "on"}))["services"]
    assert services["bookshelf-api"]["environment"]["BOOKSHELF_CACHE_TTL_SECONDS"] == "30"
    assert services["bookshelf-api"]["environment"]["FAULT"] == "on"
    assert "FAULT" not in services["bookmeta"]["environment"]


def test_the_upstream_runs_the_profile_the_scenario_names() -> None:
    """The compose topology passes `UPSTREAM_PROFILE` to bookmeta as the local one does."""
    setup = load_scenario_setup(STAMPEDE).model_copy(update={"upstream_profile": "flaky-lookups"})
    command = compose_document(_run(setup=setup))["services"]["bookmeta"]["command"]
    assert command[command.index("--profile") + 1] == "flaky-lookups"


def test_a_webhook_gets_a_relay_on_the_host_network_and_alertmanager_the_host_alias() -> None:
    """Alertmanager posts to host.docker.internal; the relay joins that to the trigger."""
    relay = WebhookRelay("172.17.0.1", 20006, "127.0.0.1", 8411)
    services = compose_document(_run(relay=relay))["services"]
    forwarder = services[RELAY_SERVICE]
    assert forwarder["network_mode"] == "host"
    assert "tcp:172.17.0.1:20006=tcp:127.0.0.1:8411" in forwarder["command"]
    assert "ports" not in forwarder
    assert services["alertmanager"]["extra_hosts"] == ["host.docker.internal:host-gateway"]


def test_observability_targets_are_in_network_names() -> None:
    """Prometheus scrapes and alerts by name: the in-network view the page can carry."""
    spec = load_stack_spec(load_scenario_setup(STAMPEDE).stack_dir)
    values = template_values(spec, "http://host.docker.internal:1/x", Path("/t"))
    assert values["app_target"] == "bookshelf-api:8080"
    assert values["alertmanager_target"] == "alertmanager:9093"
    assert values["upstream_target"] == "bookmeta:8080"


@pytest.mark.parametrize("run_id", ["20261201-153856-15b1e3", "abc", "x" * 64])
def test_project_names_are_derived_from_the_run_id_and_valid_for_compose(run_id: str) -> None:
    """Any run id gives the same short, valid project name every time."""
    name = project_name(run_id)
    assert name == project_name(run_id)
    assert re.fullmatch(r"sreforge-run-[0-9a-f]{12}", name)


def test_the_run_request_picks_the_topology() -> None:
    """`topology = "compose"` opens a compose stack, the default a local one."""
    settings = DeployerSettings()
    local = LocalTopologies(settings)
    provider = PerRunTopologies(local, ComposeTopologies(local))
    fields = {
        "run_id": "r-topology",
        "producer": "test",
        "scenario": STAMPEDE.name,
        "agent": "noop",
        "alert_route": "route",
    }
    compose = provider.open(RunRequested.model_validate({**fields, "topology": "compose"}))
    default = provider.open(RunRequested.model_validate(fields))
    assert type(compose).__name__ == "ComposeTopology"
    assert type(default).__name__ == "LocalTopology"


@pytest.mark.parametrize(
    ("ipam", "gateway"),
    [("172.18.0.1 172.18.0.0/16", "172.18.0.1"), (" 172.17.0.0/16", "172.17.0.1")],
)
def test_the_bridge_gateway_is_read_or_derived_from_the_subnet(ipam: str, gateway: str) -> None:
    """The relay listens where `host-gateway` points, even when the engine omits it."""
    assert gateway_of(ipam) == gateway


def test_a_bridge_without_an_address_is_a_deployer_error() -> None:
    """No address to give the relay: the stack does not start, with the reason."""
    with pytest.raises(DeployerError, match="no gateway address"):
        gateway_of("")


def test_the_image_tag_follows_its_inputs(tmp_path: Path) -> None:
    """Same inputs, same tag (reused by every run); a changed wheel, a new tag (rebuilt).
    Only requirements the wheels can satisfy are installed (pytest is CI's, host-side)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "requirements.txt").write_text("flask>=3.0\npytest>=8.2  # tests\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = wheels / "flask-3.1.3-py3-none-any.whl"
    wheel.write_bytes(b"one")
    image = StackImage(tmp_path, wheels, {"prometheus": "true"}, tmp_path / "locks")
    assert image.requirements() == ["flask>=3.0"]
    first = image.tag()
    assert first == image.tag()
    assert first.startswith("local/sreforge-stack:")
    wheel.write_bytes(b"two")
    assert image.tag() != first
