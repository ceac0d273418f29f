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
from sreforge_deployer._compose_image import StackImage
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


def test_every_component_and_the_observability_pair_are_services_on_the_run_network() -> None:
    """App, upstream, load, Prometheus and Alertmanager; no relay without a webhook."""
    document = compose_document(_run())
    services = document["services"]
    assert set(services) == {"bookmeta", "bookshelf-api", "loadgen", "prometheus", "alertmanager"}
    assert document["name"] == project_name("r1")
    assert all(service["networks"] == ["run"] for service in services.values())
    assert all(service["init"] is True for service in services.values()), "PID 1 gets SIGTERM"


def test_ports_are_published_on_loopback_only_at_the_leased_port() -> None:
    """The operator reaches each component on 127.0.0.1:<lease>; nothing binds elsewhere."""
    services = compose_document(_run())["services"]
    for name, service in services.items():
        (published,) = service["ports"]
        assert published == f"127.0.0.1:{PORTS[name]}:{network_url(name).rsplit(':', 1)[1]}"


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
