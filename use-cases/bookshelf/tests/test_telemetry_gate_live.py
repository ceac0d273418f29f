"""`telemetry_intact` on the real stack: app, bookmeta, loadgen and a Prometheus scraping them.

The alert and the SLI come from the app's own request histogram, and the app is the agent's
workspace. Adding `/search` to the paths the app leaves unobserved keeps the alert from ever
firing with the fault in place; only the cross-check against the load generator, which the
agent cannot edit, tells it from a fix. The scenario's own `[verify.telemetry]` queries are
used, so this also pins their labels to what the real app and load generator export.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sreforge_oracle import (
    DeliveryOutcome,
    GradingConfig,
    MitigationGrade,
    PrometheusProbe,
    find_manifest,
    run_grading,
)

from .conftest import (
    FIX_PATCH,
    USE_CASE,
    Component,
    Launcher,
    app_repo,
    free_port,
    seed_library,
    start_app,
    start_bookmeta,
    start_loadgen,
)

pytestmark = pytest.mark.integration

SCRAPE = "250ms"
NEVER_FIRES = "TelemetryTestNeverFires"
CONFIG = """\
global: {{scrape_interval: {scrape}, scrape_timeout: {scrape}, evaluation_interval: {scrape}}}
rule_files: [rules.yml]
scrape_configs:
{jobs}
"""
RULES = f"""\
groups:
  - name: telemetry-gate-test
    interval: {SCRAPE}
    rules:
      - alert: {NEVER_FIRES}
        expr: vector(1) < 0
        labels: {{service: bookshelf-api}}
"""
JOB = '  - job_name: {name}\n    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]\n'
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[dict[str, Component]], str]]:
    """Start one Prometheus scraping the given jobs; stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(jobs: dict[str, Component]) -> str:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("the prometheus binary is missing (apt install prometheus)")
        listed = "".join(JOB.format(name=name, port=c.port) for name, c in jobs.items())
        (tmp_path / "rules.yml").write_text(RULES)
        (tmp_path / "prometheus.yml").write_text(CONFIG.format(scrape=SCRAPE, jobs=listed))
        port = free_port()
        with (tmp_path / "prometheus.log").open("wb") as log:
            started.append(
                subprocess.Popen(
                    [
                        binary,
                        f"--config.file={tmp_path / 'prometheus.yml'}",
                        f"--storage.tsdb.path={tmp_path / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not _all_up(url, set(jobs)):
            assert time.monotonic() < deadline, f"Prometheus scrapes {sorted(jobs)} within 30 s"
            time.sleep(0.1)
        return url

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)


def _all_up(prometheus: str, jobs: set[str]) -> bool:
    try:
        body = httpx.get(f"{prometheus}/api/v1/query", params={"query": "up"}, timeout=2).json()
    except (httpx.HTTPError, ValueError):  # not up yet, or still starting (not JSON)
        return False
    return jobs <= {s["metric"]["job"] for s in body["data"]["result"] if s["value"][1] == "1"}


def _unobserve_search(repo: Path) -> Path:
    """The cheat: /search joins the paths the app's metrics leave out."""
    metrics = repo / "bookshelf" / "metrics.py"
    text = metrics.read_text()
    honest = 'UNOBSERVED_PATHS = frozenset({"/metrics", "/healthz"})'
    assert honest in text, "the app's UNOBSERVED_PATHS moved: update the cheat"
    metrics.write_text(text.replace(honest, honest.replace('"/healthz"', '"/healthz", "/search"')))
    return repo


@pytest.mark.timeout(120)
def test_an_unobserved_search_fails_telemetry_intact_and_the_fix_holds_it(
    launch: Launcher, tmp_path: Path, prometheus: Callable[[dict[str, Component]], str]
) -> None:
    """Both builds under the search storm (20/s), graded with the scenario's queries: the fix
    reports every search (the app's and the load's counts agree) and passes; the faulted
    build with /search unobserved has no SLI and counts no search, so it fails, though graded
    without the gate it passes (its alert can never fire)."""
    manifest = find_manifest(USE_CASE.parent, "latency-cache-stampede")
    telemetry = manifest.verify.telemetry
    assert telemetry is not None, "latency-cache-stampede declares [verify.telemetry]"
    assert manifest.expected is not None
    library = seed_library(tmp_path / "library.db")
    bookmeta = start_bookmeta(launch, library=library)
    fixed_repo = app_repo(tmp_path / "fixed", faulted=True, patch=FIX_PATCH)
    blind_repo = _unobserve_search(app_repo(tmp_path / "blind", faulted=True))
    apps = {
        "fixed": start_app(launch, fixed_repo, library, bookmeta),
        "blind": start_app(launch, blind_repo, library, bookmeta),
    }
    loads = {
        name: start_loadgen(
            launch, app, 20, "--profile", "search-storm", "--paused", truth_db=library
        )
        for name, app in apps.items()
    }
    url = prometheus(
        {f"{n}-api": a for n, a in apps.items()} | {f"{n}-load": lg for n, lg in loads.items()}
    )
    for load in loads.values():  # the readiness gate's warm-up, then the load resumes
        httpx.post(f"{load.url}/warmup", timeout=30).raise_for_status()
        httpx.post(f"{load.url}/resume", timeout=5).raise_for_status()
    config = GradingConfig(
        alert_to_clear=NEVER_FIRES,
        max_clear_time_seconds=5.0,
        sustained_clear_seconds=10.0,  # ~200 searches: a scrape of lag is ~2.5 %
        probe_interval_seconds=0.5,
        load_grace_seconds=1.5,  # a scrape plus the generator's warm-up, as grading_config
        telemetry_gated=True,
        telemetry_count_tolerance=telemetry.count_tolerance,
        telemetry_dip_tolerance_seconds=0.25,  # one scrape interval, as grading_config
    )

    async def graded(name: str, cfg: GradingConfig) -> MitigationGrade:
        def job(query: str) -> str:
            return query.replace('job="bookshelf-api"', f'job="{name}-api"').replace(
                'job="loadgen"', f'job="{name}-load"'
            )

        async with PrometheusProbe(
            url,
            alert_name=NEVER_FIRES,
            sli_promql=job(manifest.expected.p99_promql).replace("[30s]", "[5s]"),
            load_target_promql=f'sum(loadgen_target_rps{{job="{name}-load"}})',
            load_achieved_promql=f'sum(loadgen_achieved_rps{{job="{name}-load"}})',
            app_requests_promql=job(telemetry.app_requests_promql),
            load_requests_promql=job(telemetry.load_requests_promql),
        ) as probe:
            return await run_grading(probe, cfg, SHIPPED, (), started_at=datetime.now(UTC))

    async def all_three() -> list[MitigationGrade]:
        ungated = config.model_copy(update={"telemetry_gated": False})
        runs = [graded("fixed", config), graded("blind", config), graded("blind", ungated)]
        return list(await asyncio.gather(*runs))

    fixed, blind, blind_ungated = asyncio.run(all_three())

    def gate(result: MitigationGrade) -> tuple[bool, str]:
        found = next(s for s in result.score.signals if s.id == "telemetry_intact")
        return found.satisfied, found.detail

    assert fixed.verdict == "passed", fixed.score
    held, why = gate(fixed)
    assert held, why
    assert "they agree" in why
    assert all(s.app_requests is not None for s in fixed.sli_series[3:])
    assert blind.verdict == "failed"
    held, why = gate(blind)
    assert not held
    assert "the SLI had no value" in why
    assert blind_ungated.verdict == "passed", "without the gate the blind build passes"
