"""`service_held` on the real stack: app, bookmeta, loadgen and a Prometheus scraping them.

The known gap of latency-cache-stampede: cutting the app's upstream timeout far below the
upstream's ~1.2 s makes every search fast and every hit's `metadata` null. The latency
objective is met, so only the load generator's answer checks, graded by the oracle's
`service_held` gate, can tell it from the fix.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    history_samples,
    run_grading,
)

from .conftest import (
    FIX_PATCH,
    PYTHON,
    SCENARIO,
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
NEVER_FIRES = "GateTestNeverFires"
RULES = f"""\
groups:
  - name: service-gate-test
    interval: {SCRAPE}
    rules:
      - alert: {NEVER_FIRES}
        expr: vector(1) < 0
        labels: {{service: bookshelf-api}}
"""
CONFIG = """\
global: {{scrape_interval: {scrape}, scrape_timeout: {scrape}, evaluation_interval: {scrape}}}
rule_files: [rules.yml]
scrape_configs:
{jobs}
"""
JOB = '  - job_name: {name}\n    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]\n'
P99 = (
    "histogram_quantile(0.99, sum by (le) "
    '(rate(bookshelf_http_request_duration_seconds_bucket{{job="{job}"}}[5s])))'
)
SHIPPED = DeliveryOutcome(submitted=True, ci_green=True, redeployed=True)
CUT_PATCH = SCENARIO / "verify" / "negative" / "cut-upstream-timeout.patch"
P99_WINDOW_SECONDS = 5.0
"""The range of `P99`'s rate window."""


@dataclass
class Build:
    """One app under its own search storm, as Prometheus jobs `<name>-api` / `<name>-load`."""

    name: str
    app: Component
    load: Component


def _start_prometheus(home: Path, builds: list[Build]) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("the prometheus binary is missing (apt install prometheus)")
    jobs = "".join(
        JOB.format(name=f"{b.name}-{kind}", port=c.port)
        for b in builds
        for kind, c in (("api", b.app), ("load", b.load))
    )
    (home / "rules.yml").write_text(RULES)
    (home / "prometheus.yml").write_text(CONFIG.format(scrape=SCRAPE, jobs=jobs))
    port = free_port()
    with (home / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={home / 'prometheus.yml'}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, f"http://127.0.0.1:{port}"


def _wait_until(check: Callable[[], bool], message: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


def _scraped(prometheus: str, builds: list[Build]) -> bool:
    try:
        body = httpx.get(f"{prometheus}/api/v1/query", params={"query": "up"}, timeout=2).json()
    except (httpx.HTTPError, ValueError):  # not up yet, or still starting (not JSON)
        return False
    up = {s["metric"]["job"] for s in body["data"]["result"] if s["value"][1] == "1"}
    return up >= {f"{b.name}-{kind}" for b in builds for kind in ("api", "load")}


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Prometheus processes started by the test; stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)


def _probe(prometheus: str, build: Build) -> PrometheusProbe:
    load = f'{{job="{build.name}-load"}}'
    return PrometheusProbe(
        prometheus,
        alert_name=NEVER_FIRES,
        sli_promql=P99.format(job=f"{build.name}-api"),
        load_target_promql=f"sum(loadgen_target_rps{load})",
        load_achieved_promql=f"sum(loadgen_achieved_rps{load})",
        service_ok_promql=f"min(loadgen_ok_ratio{load})",
    )


async def _grade(prometheus: str, build: Build, config: GradingConfig) -> MitigationGrade:
    async with _probe(prometheus, build) as probe:
        return await run_grading(probe, config, SHIPPED, (), started_at=datetime.now(UTC))


def _checked(load: Component, result: str) -> float:
    text = httpx.get(f"{load.url}/metrics", timeout=5).text
    prefix = f'loadgen_responses_checked_total{{result="{result}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def _gate(result: MitigationGrade) -> tuple[bool, str]:
    signal_ = next(s for s in result.score.signals if s.id == "service_held")
    return signal_.satisfied, signal_.detail


@pytest.mark.timeout(90)
def test_cut_upstream_timeout_fails_service_held_and_the_fix_passes(
    launch: Launcher, tmp_path: Path, prometheus_for: list[subprocess.Popen[bytes]]
) -> None:
    """Both builds under the scenario's storm (20 searches/s), graded with the scenario's
    declared minimum: the fix answers completely and passes; the faulted build with its
    upstream timeout cut to 0.05 s (the `cut-upstream-timeout` negative) answers fast
    (p99 under the 0.3 s objective: <= 2 lookups of 0.05 s per search) but with null
    metadata, so the load generator counts its answers degraded and the run fails. Graded without
    the gate, the same cut build passes: the gap the gate closes."""
    manifest = find_manifest(USE_CASE.parent, "latency-cache-stampede")
    minimum = manifest.verify.service_min_ok_ratio
    assert minimum is not None, "latency-cache-stampede declares the service_held gate"
    bookmeta = start_bookmeta(launch, library=seed_library(tmp_path / "fixed.db"))
    fixed_repo = app_repo(tmp_path / "fixed", faulted=True, patch=FIX_PATCH)
    cut_repo = app_repo(tmp_path / "cut", faulted=True, patch=CUT_PATCH)
    fixed = start_app(launch, fixed_repo, tmp_path / "fixed.db", bookmeta)
    cut = start_app(launch, cut_repo, tmp_path / "cut.db", bookmeta)
    builds = [
        Build(
            name,
            app,
            start_loadgen(launch, app, 20, "--profile", "search-storm", "--paused", truth_db=db),
        )
        for name, app, db in (
            ("fixed", fixed, tmp_path / "fixed.db"),
            ("cut", cut, tmp_path / "cut.db"),
        )
    ]
    process, prometheus = _start_prometheus(tmp_path, builds)
    prometheus_for.append(process)
    _wait_until(lambda: _scraped(prometheus, builds), "Prometheus scrapes every job")
    for build in builds:  # the readiness gate's warm-up, then the load resumes
        httpx.post(f"{build.load.url}/warmup", timeout=30).raise_for_status()
        httpx.post(f"{build.load.url}/resume", timeout=5).raise_for_status()
    config = GradingConfig(
        alert_to_clear=NEVER_FIRES,
        max_clear_time_seconds=5.0,
        sustained_clear_seconds=6.0,
        probe_interval_seconds=0.5,
        load_grace_seconds=1.5,  # a scrape plus the generator's warm-up, as grading_config
        service_min_ok_ratio=minimum,
    )

    ungated = config.model_copy(update={"service_min_ok_ratio": None})

    async def all_three() -> list[MitigationGrade]:
        gradings = [
            _grade(prometheus, builds[0], config),
            _grade(prometheus, builds[1], config),
            _grade(prometheus, builds[1], ungated),
        ]
        return list(await asyncio.gather(*gradings))

    started = datetime.now(UTC)
    fixed_grade, cut_grade, cut_ungated = asyncio.run(all_three())

    assert fixed_grade.verdict == "passed", fixed_grade.score
    assert _gate(fixed_grade)[0], _gate(fixed_grade)[1]
    assert cut_grade.verdict == "failed"
    held, why = _gate(cut_grade)
    assert not held
    assert "of the load's checked answers were ok" in why
    assert f"need >= {minimum:.0%}" in why
    assert cut_ungated.verdict == "passed", "without the gate the cut build passes"
    assert "service_held" not in {s.id for s in cut_ungated.score.signals}
    # The warm-up's cold misses (before the resume) stay in the SLI's 5 s rate window for
    # its first seconds: whether the cut build itself is fast shows only after that.
    cut_p99 = [
        s.sli
        for s in cut_ungated.sli_series
        if s.sli is not None and s.offset_seconds >= P99_WINDOW_SECONDS
    ]
    assert cut_p99, "the cut build's SLI was sampled"
    assert manifest.expected is not None
    objective = manifest.expected.p99_threshold_seconds
    assert statistics.median(cut_p99) < objective, f"the cut build is fast: p99 {cut_p99}"
    assert _checked(builds[1].load, "degraded") > 0
    assert _checked(builds[1].load, "failed") == 0, "degraded answers are 2xx, not errors"
    assert _checked(builds[0].load, "degraded") == 0
    assert _checked(builds[0].load, "wrong") == 0
    assert _checked(builds[1].load, "wrong") == 0, "null metadata is short, not wrong"

    async def history() -> list[float | None]:
        async with _probe(prometheus, builds[1]) as probe:
            filled = await history_samples(
                probe, started_at=started, start=started, end=datetime.now(UTC), step_seconds=0.5
            )
        return [s.service_ok_ratio for s in filled]

    ratios = asyncio.run(history())
    assert len(ratios) > 2, ratios
    assert all(r is not None and r < minimum for r in ratios[2:]), ratios


def test_answers_from_before_a_pause_leave_the_ok_window(launch: Launcher, tmp_path: Path) -> None:
    """Slow answers still in flight when the load pauses (the old build's, before a redeploy)
    are counted but kept out of `loadgen_ok_ratio`; the warm-up's answers (the new build's)
    fill it again."""
    library = seed_library(tmp_path / "f.db")
    bookmeta = start_bookmeta(launch, library=library)
    app = start_app(launch, app_repo(tmp_path / "faulted", faulted=True), library, bookmeta)
    load = start_loadgen(launch, app, 20, "--profile", "search-storm", truth_db=library)
    metrics = f"{load.url}/metrics"

    def sample(name: str) -> float:
        text = httpx.get(metrics, timeout=5).text
        lines = text.splitlines()
        return next(float(line.split()[-1]) for line in lines if line.startswith(name + " "))

    _wait_until(lambda: sample("loadgen_inflight") >= 10, "slow searches pile up in flight")
    httpx.post(f"{load.url}/pause", timeout=5).raise_for_status()
    in_flight_at_pause = sample("loadgen_inflight")
    _wait_until(lambda: sample("loadgen_inflight") == 0, "in-flight searches finish", 15)
    assert _checked(load, "ok") >= in_flight_at_pause
    assert math.isnan(sample("loadgen_ok_ratio"))
    warmup = httpx.post(f"{load.url}/warmup", timeout=30).json()
    assert warmup["requests"] == warmup["ok"] == 48
    assert sample("loadgen_ok_ratio") == 1.0


def test_the_cut_timeout_negative_is_green_in_ci(tmp_path: Path) -> None:
    """The negative fixture reaches grading: the app's own suite (the CI gate) passes on it,
    so only the oracle can reject it."""
    repo = app_repo(tmp_path / "cut", faulted=True, patch=CUT_PATCH)
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, f"app suite failed:\n{done.stdout[-3000:]}"
