"""What adopting a stack takes on either topology: its leases back, its rule timings,
and proof that its Prometheus and Alertmanager still answer.

`local/_adopt.py` and `_compose_adopt.py` each restore their own stack's state; the steps
they share are here once.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import httpx
from sreforge_prom import shared_tls_context

from sreforge_deployer._errors import StackLostError
from sreforge_deployer._ports import PortAllocator, PortLease, reclaim_leases
from sreforge_deployer._render import RenderedObservability, render_observability
from sreforge_deployer._settings import DeployerSettings

__all__ = ["check_answering", "reclaim_ports", "rendered_again"]

_HEALTH_DEADLINE_S = 5.0
_POLL_S = 0.1


def reclaim_ports(
    run_id: str,
    ports: Mapping[str, int],
    port_lock_dir: Path | None,
    settings: DeployerSettings,
) -> dict[str, PortLease]:
    """The recorded stack's leases, all or none (`StackLostError` if a live process
    holds one), under the lock dir it recorded, else the settings'."""
    allocator = PortAllocator(
        port_lock_dir or settings.port_lock_dir,
        settings.port_range_low,
        settings.port_range_high,
    )
    return reclaim_leases(run_id, ports, allocator)


def rendered_again(
    templates: Path, observability: Path, values: Mapping[str, str], time_scale: float
) -> RenderedObservability:
    """The run's rendered timings (the readiness gate settles on them), rendered again
    into scratch: the run's own files are what its Prometheus reads, left untouched."""
    with tempfile.TemporaryDirectory(prefix="adopt-") as scratch:
        timings = render_observability(templates, Path(scratch), values, time_scale)
    return replace(
        timings,
        prometheus_config=observability / "prometheus.yml",
        rules=observability / "rules.yml",
        alertmanager_config=observability / "alertmanager.yml",
    )


def check_answering(run_id: str, urls: list[str]) -> None:
    """Each URL answers 2xx within a few seconds; else `StackLostError` naming it."""
    with httpx.Client(timeout=1.0, trust_env=False, verify=shared_tls_context()) as client:
        for url in urls:
            if not _answers(client, url):
                raise StackLostError(f"run {run_id}: {url} does not answer")


def _answers(client: httpx.Client, url: str) -> bool:
    deadline = time.monotonic() + _HEALTH_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            if client.get(url).is_success:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(_POLL_S)
    return False
