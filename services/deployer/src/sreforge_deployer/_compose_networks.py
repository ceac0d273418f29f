"""Who reaches whom in a run's compose project: networks per `reaches`, one gateway.

Docker networks are symmetric (every member can dial every other), so the service,
which runs the agent's code, shares a network only with what it `reaches`:

- `app` (internal): the service, the components it `reaches`, and the gateway.
- `harness` (internal): every other component, Prometheus, Alertmanager, the
  components the service reaches (they are scraped), and the gateway, which carries
  the service's name there: the load generator and Prometheus dial `bookshelf-api`
  as before and land on the gateway, which joins them to the service on `app`.
- `agent` (internal): the gateway alone until an in-box agent session joins it; there
  the gateway answers to the service's, Prometheus' and Alertmanager's names (the
  agent's page), never to the load generator's or the upstream's.
- `app` and `agent`, where the agent's code runs, have no host address on their bridge
  (`inhibit_ipv4`): an internal network drops only forwarded traffic, and a container
  on one still has a default route to its bridge's address on the host, so whatever
  listens there (or on 0.0.0.0) would answer it. `harness` keeps its address: its
  Alertmanager posts to the host-side webhook relay that way.
- `edge`: the gateway alone. Internal networks publish no ports, so the gateway
  publishes every component's leased port on 127.0.0.1 and joins it to the
  component; IP masquerading is off, so not even the gateway reaches outside.

The gateway is the harness's stdlib TCP relay (`sreforge_confine._relay`), listening
only on its own address of each network (by an alias only it has there), so the
service can dial it on `app` but finds nothing listening (nor can an agent on
`agent` reach the load generator through it). Each real component is
also `real-<name>` on its home network: the gateway's way to it, unambiguous though
the gateway carries the service's plain name on `harness`.
"""

from __future__ import annotations

from typing import Any

from sreforge_deployer._spec import StackSpec
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS

__all__ = [
    "AGENT_NETWORK",
    "AGENT_VIEW",
    "APP_NETWORK",
    "EDGE_NETWORK",
    "GATEWAY",
    "HARNESS_NETWORK",
    "gateway_networks",
    "gateway_specs",
    "network_definitions",
    "networks_of",
    "real_name",
]

APP_NETWORK = "app"
HARNESS_NETWORK = "harness"
EDGE_NETWORK = "edge"
AGENT_NETWORK = "agent"
AGENT_VIEW = (PROMETHEUS, ALERTMANAGER)
"""What an in-box agent reaches besides the service: the page's endpoints."""
GATEWAY = "gateway"
_MTU = {"com.docker.network.driver.mtu": "1400"}
_NO_HOST = {**_MTU, "com.docker.network.bridge.inhibit_ipv4": "true"}


def real_name(name: str) -> str:
    """`real-<name>`: the component itself (never the gateway) on its home network."""
    return f"real-{name}"


def _listen_alias(network: str) -> str:
    return f"{GATEWAY}-on-{network}"


def network_definitions() -> dict[str, Any]:
    """The project's networks: `app`, `harness`, `agent` internal (`app` and `agent`
    without a host address), `edge` unmasqueraded."""
    return {
        APP_NETWORK: {"internal": True, "driver_opts": dict(_NO_HOST)},
        HARNESS_NETWORK: {"internal": True, "driver_opts": dict(_MTU)},
        AGENT_NETWORK: {"internal": True, "driver_opts": dict(_NO_HOST)},
        EDGE_NETWORK: {
            "driver_opts": {**_MTU, "com.docker.network.bridge.enable_ip_masquerade": "false"}
        },
    }


def networks_of(spec: StackSpec, name: str) -> dict[str, Any]:
    """The networks of component (or Prometheus/Alertmanager) `name`, with its aliases."""
    home = {"aliases": [real_name(name)]}
    if name == spec.service:
        return {APP_NETWORK: home}
    if name in spec.component(spec.service).reaches:
        return {APP_NETWORK: {}, HARNESS_NETWORK: home}
    return {HARNESS_NETWORK: home}


def gateway_networks(spec: StackSpec) -> dict[str, Any]:
    """The gateway on every network; on `harness` it also answers to the service's name,
    on `agent` to the names of the agent's page."""
    return {
        APP_NETWORK: {"aliases": [_listen_alias(APP_NETWORK)]},
        HARNESS_NETWORK: {"aliases": [spec.service, _listen_alias(HARNESS_NETWORK)]},
        AGENT_NETWORK: {"aliases": [spec.service, *AGENT_VIEW, _listen_alias(AGENT_NETWORK)]},
        EDGE_NETWORK: {"aliases": [_listen_alias(EDGE_NETWORK)]},
    }


def gateway_specs(spec: StackSpec, published: dict[str, int], ports: dict[str, int]) -> list[str]:
    """The relay's `LISTEN=CONNECT` specs: each published port to its component, the
    service's port on `harness` to the service, and the page's endpoints on `agent`.

    `published` maps a component to its leased host port, `ports` to the port it listens
    on inside its container.
    """
    edge = _listen_alias(EDGE_NETWORK)
    specs = [
        f"tcp:{edge}:{lease}=tcp:{real_name(name)}:{ports[name]}"
        for name, lease in published.items()
    ]
    service_port = ports[spec.service]
    harness = _listen_alias(HARNESS_NETWORK)
    specs.append(f"tcp:{harness}:{service_port}=tcp:{real_name(spec.service)}:{service_port}")
    agent = _listen_alias(AGENT_NETWORK)
    for name in (spec.service, *AGENT_VIEW):
        specs.append(f"tcp:{agent}:{ports[name]}=tcp:{real_name(name)}:{ports[name]}")
    return specs
