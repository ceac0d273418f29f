"""The catalog end to end: every incident scenario's reference passes and noop fails.

One whole run each at time scale 0.1 (`sreforge run <id> --agent reference|noop`), in the
session's pool beside every other module's runs. The default scenario
(`latency-cache-stampede`) is `test_runs.py`'s, which runs its reference and noop with
more checks; this module runs every other scenario folder under `use-cases/`, so a new
scenario is in CI the moment it lands. Qualification (`sreforge qualify`, ten trials per
arm) is not CI's: this is the once-each smoke issue 14 asks for.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sreforge_contracts import discover_scenarios, load_scenario
from wholerun import REPO, SCENARIO, RunPool, RunSpec, WholeRuns, finished, open_pool

pytestmark = pytest.mark.integration

HELD_BACK: dict[str, str] = {}
"""Scenarios on main that CI's catalog does not run yet, each with the reason."""
CATALOG = [
    scenario.id
    for scenario in map(load_scenario, discover_scenarios(REPO / "use-cases"))
    if scenario.manifest.profile == "incident"
    and scenario.id != SCENARIO
    and scenario.id not in HELD_BACK
]
# A run's folder shows on what the agent can read (the page, Prometheus's rule paths), so
# its name must not carry the scenario id: the contamination guard would abort the run.
NAMES = {scenario: f"c{number}" for number, scenario in enumerate(CATALOG, 1)}
RUNS = {
    f"{NAMES[scenario]}-{agent}": RunSpec(agent, scenario=scenario)
    for scenario in CATALOG
    for agent in ("reference", "noop")
}
TEST_RUNS = {
    f"{test}[{scenario}]": f"{NAMES[scenario]}-{agent}"
    for scenario in CATALOG
    for test, agent in (
        ("test_reference_fix_passes", "reference"),
        ("test_noop_fails", "noop"),
    )
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected scenarios' runs, started with the session's; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", CATALOG)
def test_reference_fix_passes(pool: RunPool, scenario: str) -> None:
    """The scenario's reference fix goes through CI, merge and redeploy, and passes; one
    schema-valid record, nothing of the run left."""
    run, outcome, record = finished(pool, f"{NAMES[scenario]}-reference")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert record["scenario_id"] == scenario
    assert record["ci"]["green"]
    assert record["deploy"]["redeployed"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", CATALOG)
def test_noop_fails(pool: RunPool, scenario: str) -> None:
    """Doing nothing does not mitigate the scenario: its alert fired (the run was
    triggered and graded) and the verdict is failed."""
    run, outcome, record = finished(pool, f"{NAMES[scenario]}-noop")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["scenario_id"] == scenario
    assert record["trigger"]["alert_name"], "a noop run is graded after its alert fired"
