"""Rendering the stack's observability templates with the run's time scale."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from sreforge_deployer import render_observability
from sreforge_deployer._render import MIN_SAMPLES_PER_WINDOW, scale_expr
from sreforge_prom import duration_ms, scale_duration

from .conftest import BOOKSHELF

TEMPLATES = BOOKSHELF / "stacks" / "bookshelf-flask" / "observability"
VALUES = {
    "app_target": "127.0.0.1:20001",
    "upstream_target": "127.0.0.1:20002",
    "loadgen_target": "127.0.0.1:20003",
    "alertmanager_target": "127.0.0.1:20004",
    "webhook_url": "http://127.0.0.1:20005/hooks/abc",
    "webhook_token_file": "/dev/null",
}


@pytest.mark.parametrize(
    ("real", "scale", "expected"),
    [
        ("30s", 0.1, "3s"),
        ("5s", 0.1, "500ms"),
        ("5m", 0.1, "30s"),
        ("1m30s", 0.05, "4500ms"),
        ("1m", 1.0, "1m"),
        ("1ms", 0.01, "1ms"),
    ],
)
def test_scale_duration_is_exact_to_the_millisecond(real: str, scale: float, expected: str) -> None:
    """Durations scale uniformly and come out as valid Prometheus durations."""
    assert scale_duration(real, scale) == expected


def test_scale_expr_scales_windows_subqueries_and_offsets() -> None:
    """Every duration inside PromQL moves with the scale, so rule relations hold."""
    expr = "rate(a[30s]) > 0 and max_over_time(b[5m:30s]) and rate(c[1m] offset 2m) and d[2m:]"
    assert scale_expr(expr, 0.1) == (
        "rate(a[3s]) > 0 and max_over_time(b[30s:3s]) and rate(c[6s] offset 12s) and d[12s:]"
    )


def test_scale_expr_leaves_a_duration_prometheus_refuses_to_prometheus() -> None:
    """`[30s1m]` is not Prometheus syntax (largest unit first): it is not scaled as if it were.

    The old parser read it as 90 s; Prometheus refuses the rule file, which the stack's
    start-up then reports.
    """
    assert scale_expr("rate(a[30s1m]) and rate(b[1m30s])", 0.1) == "rate(a[30s1m]) and rate(b[9s])"


@pytest.fixture(scope="module")
def rendered_bookshelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    render_observability(TEMPLATES, out, VALUES, 0.1)
    return out


def test_rendered_bookshelf_config_passes_promtool(rendered_bookshelf: Path) -> None:
    """The real Prometheus tooling accepts the rendered config and rules (ms durations too)."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool must be installed (Debian package prometheus)"
    for command in ("config", "rules"):
        target = rendered_bookshelf / ("prometheus.yml" if command == "config" else "rules.yml")
        result = subprocess.run(
            [promtool, "check", command, str(target)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_alertmanager_config_passes_amtool(rendered_bookshelf: Path) -> None:
    """Alertmanager accepts the rendered routing and webhook receiver."""
    amtool = shutil.which("amtool")
    assert amtool, "amtool must be installed (Debian package prometheus-alertmanager)"
    result = subprocess.run(
        [amtool, "check-config", str(rendered_bookshelf / "alertmanager.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_duration_is_scaled_uniformly(rendered_bookshelf: Path) -> None:
    """Scrape/eval intervals, `for:`, windows and Alertmanager timers all shrink by 10x."""
    prom = yaml.safe_load((rendered_bookshelf / "prometheus.yml").read_text())
    rules = yaml.safe_load((rendered_bookshelf / "rules.yml").read_text())
    am = yaml.safe_load((rendered_bookshelf / "alertmanager.yml").read_text())
    assert prom["global"]["scrape_interval"] == "500ms"
    assert prom["global"]["evaluation_interval"] == "500ms"
    assert prom["global"]["scrape_timeout"] == "400ms"
    primary = next(
        rule
        for group in rules["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "BookshelfApiLatencyP99High"
    )
    assert primary["for"] == "3s"
    assert "[3s]" in primary["expr"]
    assert "$value" in primary["annotations"]["description"]
    route = am["route"]
    assert (route["group_wait"], route["group_interval"], route["repeat_interval"]) == (
        "500ms",
        "1s",
        "30s",
    )
    assert am["global"]["resolve_timeout"] == "6s"


def test_each_rate_window_keeps_six_samples(tmp_path: Path) -> None:
    """At any scale the scrape interval fits at least six samples into the shortest window."""
    render_observability(TEMPLATES, tmp_path, VALUES, 0.03)
    prom = yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    rules_text = (tmp_path / "rules.yml").read_text()
    windows = [duration_ms(w) for w in re.findall(r"\[(\d+(?:ms|[smh]))\]", rules_text)]
    interval = duration_ms(prom["global"]["scrape_interval"])
    assert min(windows) / interval >= MIN_SAMPLES_PER_WINDOW
    assert duration_ms(prom["global"]["scrape_timeout"]) <= interval


def test_the_warm_up_settles_past_request_windows_not_restart_counts(tmp_path: Path) -> None:
    """A warm-up waits out the windows requests feed (bookshelf's longest: 1m), not a
    window counting process starts or counter resets (its 5m restart count); a window
    nested under another function still counts."""
    bookshelf = render_observability(TEMPLATES, tmp_path / "bookshelf", VALUES, 0.1)
    assert (bookshelf.longest_window, bookshelf.settle_window) == ("30s", "6s")
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    (templates / "rules.yml").write_text(
        "groups:\n  - name: g\n    rules:\n"
        "      - alert: Counted\n"
        '        expr: changes(up[10m]) > 1 or resets(x{a="b"}[20m]) > 0\n'
        "        labels: {service: s}\n"
        "      - alert: Fed\n        expr: max_over_time(rate(y[2m])[4m:]) > 1\n"
        "        labels: {service: s}\n"
    )
    counted = render_observability(templates, tmp_path / "counted", VALUES, 1.0)
    assert (counted.longest_window, counted.settle_window) == ("20m", "4m")


def test_unknown_placeholder_names_the_template(tmp_path: Path) -> None:
    """A template asking for a value the topology does not know fails naming the file."""
    from sreforge_deployer import StackSpecError

    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    missing = {k: v for k, v in VALUES.items() if k != "loadgen_target"}
    with pytest.raises(StackSpecError, match=r"prometheus\.yml.*loadgen_target"):
        render_observability(templates, tmp_path / "out", missing, 0.1)


def test_an_alert_without_a_service_or_with_another_role_is_refused(tmp_path: Path) -> None:
    """Rules lint (SPEC §6): an alerting rule names the service it pages for, and a role,
    where set, is `ambient`; the error names the file and every such alert. A recording
    rule pages nobody and needs neither."""
    from sreforge_deployer import StackSpecError

    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    (templates / "rules.yml").write_text(
        "groups:\n  - name: g\n    rules:\n"
        "      - record: job:up:sum\n        expr: sum(up)\n"
        "      - alert: Unplaced\n        expr: vector(1)\n        labels: {severity: critical}\n"
        "      - alert: Blank\n        expr: vector(1)\n        labels: {service: ' '}\n"
        "      - alert: Odd\n        expr: vector(1)\n        labels: {service: s, role: page}\n"
        "      - alert: Heartbeat\n        expr: vector(1)\n"
        "        labels: {service: monitoring, role: ambient}\n"
    )
    with pytest.raises(StackSpecError) as refused:
        render_observability(templates, tmp_path / "out", VALUES, 0.1)
    message = str(refused.value)
    assert message.startswith(f"{templates / 'rules.yml'}: ")
    assert "'Unplaced' has no `service` label" in message
    assert "'Blank' has no `service` label" in message
    assert "'Odd': role 'page', expected 'ambient'" in message
    assert "Heartbeat" not in message
    assert "job:up:sum" not in message
