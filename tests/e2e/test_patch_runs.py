"""The patch profile end to end: `sreforge run patch-stale-sort-keys`, no stack.

Reference, noop and both negatives at time scale 0.1 in the session's pool. A patch run
builds only the workspace at the pinned base commit, is triggered at once by its task
page, and is graded from CI's hidden fail-to-pass and pass-to-pass sets: no redeploy,
no SLI series, the record listing each graded test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from wholerun import RunPool, RunSpec, WholeRuns, finished, open_pool

pytestmark = pytest.mark.integration

SCENARIO = "patch-stale-sort-keys"
NEGATIVES = ("search-by-title-text", "refresh-title-key-on-update")
RUNS = {
    "p-reference": RunSpec("reference", scenario=SCENARIO),
    "p-noop": RunSpec("noop", scenario=SCENARIO),
    **{
        f"p-neg{i}": RunSpec(f"scripted:{name}", scenario=SCENARIO)
        for i, name in enumerate(NEGATIVES)
    },
}
TEST_RUNS = {
    "test_reference_fix_passes_every_hidden_test": "p-reference",
    "test_noop_fails_without_a_submission": "p-noop",
    **{
        f"test_negative_keeps_ci_green_and_fails[{name}]": f"p-neg{i}"
        for i, name in enumerate(NEGATIVES)
    },
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected patch runs, started with the session's; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


def _graded(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in record["ci"]["test_sets"] if s["name"].endswith("_to_pass")}


@pytest.mark.timeout(300)
def test_reference_fix_passes_every_hidden_test(pool: RunPool) -> None:
    """CI green, every fail-to-pass and pass-to-pass test passed, no deploy."""
    run, outcome, record = finished(pool, "p-reference")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert record["profile"] == "patch"
    assert record["deploy"] is None
    assert record["trigger"]["source"] == "task"
    graded = _graded(record)
    assert len(graded["fail_to_pass"]["passed_tests"]) == 5
    assert graded["fail_to_pass"]["failed_tests"] == []
    assert graded["pass_to_pass"]["failed_tests"] == []


@pytest.mark.timeout(300)
def test_noop_fails_without_a_submission(pool: RunPool) -> None:
    """No submission: failed, no CI."""
    run, outcome, record = finished(pool, "p-noop")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["ci"] is None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", NEGATIVES)
def test_negative_keeps_ci_green_and_fails(pool: RunPool, name: str) -> None:
    """A lazy fix passes CI but leaves a fail-to-pass test failing: failed, not rejected."""
    run, outcome, record = finished(pool, f"p-neg{NEGATIVES.index(name)}")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert record["ci"]["green"]
    assert _graded(record)["fail_to_pass"]["failed_tests"]
