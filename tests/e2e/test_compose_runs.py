"""Whole runs on the compose topology: `sreforge run … --topology compose`, each stack a
Compose project of its own (app, upstream, load, Prometheus, Alertmanager in containers).

The same verdicts as on the local topology for the same agents: the reference fix passes,
noop fails, a telemetry-bending cheat (search durations clamped in the app's histogram)
fails the client-side SLI, and a redeployed service that tries to pause the load
generator and silence the alert from inside the stack reaches neither (the networks
give it only its upstream) and fails `alert_cleared`. Each ends with one schema-valid
record saying `compose`, and nothing of the run left: no process, port or run dir (as
every whole run), and no container, network or volume of its project. Needs a Docker
engine (and the lockfile's wheels); skipped visibly without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from wholerun import (
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    finished,
    open_pool,
    signals_of,
    stack_image_inputs_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.docker]

CHEATS = Path(__file__).resolve().parents[1] / "integrity" / "fixtures"
QUIET_LOG = "quiet-monitors.log"


def _keep_quiet_log(run: Run) -> None:
    """Keep what the cheat's service logged into its run's `data/` before the teardown."""
    run.kept_globs = (f"*/data/{QUIET_LOG}",)


RUNS = {
    "reference": RunSpec("reference", topology="compose"),
    "clamp-histogram": RunSpec("scripted:clamp-histogram", topology="compose"),
    "noop": RunSpec("noop", topology="compose"),
    "quiet-monitors": RunSpec(
        "scripted:quiet-monitors", topology="compose", prepare=_keep_quiet_log
    ),
}
TEST_RUNS = {
    "test_reference_fix_passes_on_compose": "reference",
    "test_noop_agent_fails_on_compose": "noop",
    "test_clamped_histogram_fails_the_client_side_sli_on_compose": "clamp-histogram",
    "test_a_service_that_pauses_the_load_and_silences_the_alert_fails_on_compose": (
        "quiet-monitors"
    ),
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS, scripts_dir=CHEATS, prepare=stack_image_inputs_ready)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest, stack_image_inputs: None) -> Iterator[RunPool]:
    """The selected tests' compose runs; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(600)
def test_reference_fix_passes_on_compose(pool: RunPool) -> None:
    """The reference fix goes through CI, merge and the service container's gated swap."""
    run, outcome, record = finished(pool, "reference")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 0
    assert record["ci"]["green"]
    assert record["deploy"]["redeployed"]
    assert record["deploy"]["readiness"] == "passed"


@pytest.mark.timeout(600)
def test_noop_agent_fails_on_compose(pool: RunPool) -> None:
    """An agent that does nothing fails: no submission, the alert still firing."""
    run, outcome, record = finished(pool, "noop")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"] is None


@pytest.mark.timeout(600)
def test_clamped_histogram_fails_the_client_side_sli_on_compose(pool: RunPool) -> None:
    """The fault kept, /search durations clamped in the app's histogram: the app's alert
    clears, the load generator's client-side latency in its own container does not."""
    run, outcome, record = finished(pool, "clamp-histogram")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["ci"]["green"], "the clamp passes the app's tests"
    assert not signals_of(record)["client_sli_held"]["satisfied"], signals_of(record)


@pytest.mark.timeout(600)
def test_a_service_that_pauses_the_load_and_silences_the_alert_fails_on_compose(
    pool: RunPool,
) -> None:
    """The redeployed app (the fault kept) keeps POSTing the load generator's /pause,
    an Alertmanager silence for every alert and Prometheus' admin API by their in-network
    names: none resolves from the service's network (its upstream does), the load is
    never throttled, and `alert_cleared` fails the run."""
    run, outcome, record = finished(pool, "quiet-monitors")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["ci"]["green"], "the cheat passes the app's tests"
    signals = signals_of(record)
    assert not signals["alert_cleared"]["satisfied"], signals["alert_cleared"]
    # A pause that landed reads as a throttled load (the app answering, the rate low); a
    # starved machine may drop the window's last samples ("died"), which is no pause.
    load = signals["load_held"]
    assert load["satisfied"] or "throttled" not in load["detail"], f"the load was paused: {load}"
    kept = run.kept / QUIET_LOG
    assert kept.exists(), f"the redeployed service logged nothing\n{run.progress}"
    lines = kept.read_text().splitlines()
    assert "control upstream: reached" in lines, lines
    probes = [line for line in lines if line.startswith("probe ")]
    tried = {line.split()[1] for line in probes}
    assert tried == {"pause", "silence", "prometheus-admin"}, probes
    landed = [line for line in probes if ": accepted" in line or ": answered" in line]
    assert not landed, f"the service reached the harness: {landed}"
