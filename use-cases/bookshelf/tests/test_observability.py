"""The Prometheus/Alertmanager templates render, validate with the real tools, and encode
the alerting contract (primary alert, service labels, ambient heartbeat, webhook)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from string import Template
from typing import Any

import pytest
import yaml

from .conftest import SCENARIO, STACK

OBSERVABILITY = STACK / "observability"
PLACEHOLDERS = {
    "app_target": "127.0.0.1:18000",
    "upstream_target": "127.0.0.1:18001",
    "loadgen_target": "127.0.0.1:18002",
    "alertmanager_target": "127.0.0.1:18003",
    "webhook_url": "http://127.0.0.1:18004/alerts",
}


def _render(tmp_path: Path) -> Path:
    token = tmp_path / "token"
    token.write_text("secret\n")
    values = {**PLACEHOLDERS, "rules_path": str(tmp_path / "rules.yml"),
              "webhook_token_file": str(token)}  # fmt: skip
    for name in ("prometheus.yml", "rules.yml", "alertmanager.yml"):
        template = Template((OBSERVABILITY / name).read_text())
        (tmp_path / name).write_text(template.substitute(values))
    return tmp_path


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (scripts/setup installs it)")
    return path


def _rules(tmp_path: Path) -> list[dict[str, Any]]:
    groups = yaml.safe_load((_render(tmp_path) / "rules.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_templates_use_only_known_placeholders() -> None:
    """The topology fills exactly these names; a typo would fail at render time."""
    known = {*PLACEHOLDERS, "rules_path", "webhook_token_file"}
    for path in OBSERVABILITY.glob("*.yml"):
        used = set(re.findall(r"\$\{(\w+)\}", path.read_text()))
        assert used <= known, f"{path.name}: unknown placeholders {used - known}"


def test_rendered_config_passes_promtool_and_amtool(tmp_path: Path) -> None:
    """What Prometheus and Alertmanager will load is valid for the real binaries."""
    out = _render(tmp_path)
    for argv in (
        [_tool("promtool"), "check", "config", str(out / "prometheus.yml")],
        [_tool("promtool"), "check", "rules", str(out / "rules.yml")],
        [_tool("amtool"), "check-config", str(out / "alertmanager.yml")],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout}{done.stderr}"


def test_every_rule_names_its_service(tmp_path: Path) -> None:
    """The oracle scopes no-new-alerts by the `service` label."""
    unlabelled = [r["alert"] for r in _rules(tmp_path) if not r.get("labels", {}).get("service")]
    assert not unlabelled


def test_primary_alert_matches_the_scenario_sli(tmp_path: Path) -> None:
    """The alert and the oracle's SLI query are the same expression and threshold."""
    rule = next(r for r in _rules(tmp_path) if r["alert"] == "BookshelfApiLatencyP99High")
    manifest = tomllib.loads((SCENARIO / "scenario.toml").read_text())
    sli = manifest["expected"]["p99_promql"].strip()
    assert rule["expr"].strip() == f"{sli} > {manifest['expected']['p99_threshold_seconds']}"
    assert rule["for"] == "30s"
    assert rule["labels"] == {"severity": "critical", "service": "bookshelf-api"}


def test_an_ambient_rule_exists_and_other_alerts_are_not_ambient(tmp_path: Path) -> None:
    """Ambient alerts are ignored by the oracle; real ones must never be marked ambient."""
    ambient = {r["alert"] for r in _rules(tmp_path) if r["labels"].get("role") == "ambient"}
    assert ambient == {"Watchdog"}
    names = {r["alert"] for r in _rules(tmp_path)}
    expected = {"BookshelfApiHighErrorRate", "BookshelfApiDown", "BookmetaErrorsElevated"}
    assert expected <= names


def test_alertmanager_pages_the_webhook_with_a_bearer_token(tmp_path: Path) -> None:
    """Pages go to the run's webhook under a neutral receiver, resolved ones included."""
    config = yaml.safe_load((_render(tmp_path) / "alertmanager.yml").read_text())
    assert config["route"]["receiver"] == "oncall-pager"
    pager = next(r for r in config["receivers"] if r["name"] == "oncall-pager")
    hook = pager["webhook_configs"][0]
    assert hook["url"] == PLACEHOLDERS["webhook_url"]
    assert hook["send_resolved"] is True
    assert hook["http_config"]["authorization"]["credentials_file"].endswith("token")


def test_scrape_jobs_and_intervals(tmp_path: Path) -> None:
    """Job names the rules query, and a 5 s interval: ≥ 6 samples per 30 s rate window."""
    config = yaml.safe_load((_render(tmp_path) / "prometheus.yml").read_text())
    jobs = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]
    }
    assert jobs == {
        "bookshelf-api": [PLACEHOLDERS["app_target"]],
        "bookmeta": [PLACEHOLDERS["upstream_target"]],
        "loadgen": [PLACEHOLDERS["loadgen_target"]],
    }
    assert config["global"]["scrape_interval"] == "5s"
    assert config["global"]["evaluation_interval"] == "5s"


@pytest.mark.timeout(60)
def test_restarts_rule_pages_a_crash_loop_never_a_deploy_or_two(tmp_path: Path) -> None:
    """`BookshelfApiRestarting` (promtool's rule unit test, 5 s scrapes): two new serving
    processes in 5 min (an arm's deploy and a fix's, in any scenario) stay quiet; a third
    pages at once."""
    out = _render(tmp_path)
    metric = 'process_start_time_seconds{job="bookshelf-api"}'
    # Start times: one process, two deploys 30 s apart, then a crash every 15 s.
    crashing = "100x20 200x6 300x6 " + " ".join(f"{400 + 100 * n}x3" for n in range(4))
    two_deploys = "100x20 200x6 300x120"
    labels = {"severity": "critical", "service": "bookshelf-api", "job": "bookshelf-api"}
    annotations = {
        "summary": "bookshelf API keeps restarting",
        "description": "The bookshelf-api serving process started 3 times in the last 5 minutes.",
    }
    firing = [{"exp_labels": labels, "exp_annotations": annotations}]
    alert = "BookshelfApiRestarting"
    tests = {
        "rule_files": [str(out / "rules.yml")],
        "evaluation_interval": "5s",
        "tests": [
            {
                "interval": "5s",
                "input_series": [{"series": metric, "values": crashing}],
                "alert_rule_test": [
                    {"eval_time": "160s", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "175s", "alertname": alert, "exp_alerts": firing},
                ],
            },
            {
                "interval": "5s",
                "input_series": [{"series": metric, "values": two_deploys}],
                "alert_rule_test": [
                    {"eval_time": f"{t}s", "alertname": alert, "exp_alerts": []}
                    for t in (130, 160, 300, 600)
                ],
            },
        ],
    }
    (tmp_path / "restarts_test.yml").write_text(yaml.safe_dump(tests))
    argv = [_tool("promtool"), "test", "rules", str(tmp_path / "restarts_test.yml")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=50)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}"
