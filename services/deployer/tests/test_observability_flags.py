"""The run's Prometheus and Alertmanager expose no control API to the agent.

The agent's page lists both URLs. With `--web.enable-lifecycle` it could reload or quit
them over HTTP, with `--web.enable-admin-api` delete series or snapshot the TSDB: the
oracle's `monitoring_intact` gate would catch a restart, but a run needs neither flag.
"""

from __future__ import annotations

from pathlib import Path

from sreforge_deployer._observability import alertmanager_launch, prometheus_launch
from sreforge_deployer._render import RenderedObservability

CONTROL_FLAGS = ("--web.enable-lifecycle", "--web.enable-admin-api", "--web.enable-remote-write")


def rendered(tmp_path: Path) -> RenderedObservability:
    return RenderedObservability(
        prometheus_config=tmp_path / "prometheus.yml",
        rules=tmp_path / "rules.yml",
        alertmanager_config=tmp_path / "alertmanager.yml",
        scrape_interval="5s",
        evaluation_interval="5s",
        shortest_window=None,
        longest_window=None,
    )


def test_no_control_api_flag_is_passed(tmp_path: Path) -> None:
    """Neither launch line turns on a lifecycle, admin or write API."""
    prometheus = prometheus_launch(
        "prometheus",
        rendered(tmp_path),
        9090,
        tmp_path,
        tmp_path,
        env={},
        time_scale=0.1,
        timeout_seconds=5,
    )
    alertmanager = alertmanager_launch(
        "alertmanager", rendered(tmp_path), 9093, tmp_path, tmp_path, env={}, timeout_seconds=5
    )
    for spec in (prometheus, alertmanager):
        enabled = [arg for arg in spec.argv if arg.startswith(CONTROL_FLAGS)]
        assert enabled == [], f"{spec.name} starts with {enabled}"
