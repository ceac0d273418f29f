"""retry-storm on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the app's suite and its holdings client in a subprocess on each tree (the whole
run is `sreforge run retry-storm`; the network's side is `test_holdings_hiccups.py`).
What the scenario claims here: the fault is two old commits (the holdings feature, then a
client change) whose tests stay green; on them a count against a stalled network is asked
again and again until its second is spent (each ask work the network still does); the
reference asks once, and re-asks only refused counts within a tenth of its asks; every
negative still asks three or more times, and none edits a test the workspace already has.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, app_suite, edited_tests, git, paging_rule

pytestmark = pytest.mark.timeout(300)

SCENARIO = USE_CASE / "scenarios" / "retry-storm"
FEATURE, FAULT = sorted((SCENARIO / "inject").glob("*.patch"))
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))

# Forty holdings requests at once against a network on which every ask stalls (answered by
# a timeout after at most 50 ms, however long the ask was given), with the client and the
# settings the deployment gives: the asks sent per request.
_ASKS = """
import threading, time
import httpx
from bookshelf import Settings
from bookshelf.holdings import HoldingsClient
from bookshelf.metrics import build_instruments
from bookshelf.upstream import UpstreamError

sent = []
def handle(request):
    sent.append(request.url.path)
    time.sleep(min(0.05, request.extensions["timeout"]["read"]))
    raise httpx.ReadTimeout("stalled", request=request)

settings = Settings.from_env({})
client = HoldingsClient("http://metadata.test", settings.upstream_timeout_seconds,
                        build_instruments(), httpx.MockTransport(handle))
def count():
    try:
        client.fetch("9780591541281")
    except UpstreamError:
        pass
threads = [threading.Thread(target=count) for _ in range(40)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(sent) / len(threads))
"""


def _tree(tmp_path: Path, patch: Path | None = None, *, faulted: bool = True) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FEATURE))
    if faulted:
        git(repo, "am", "-q", str(FAULT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _asks_per_stalled_count(repo: Path) -> float:
    done = subprocess.run(
        [PYTHON, "-c", _ASKS],
        cwd=repo, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


def test_fault_is_two_old_commits_the_feature_then_the_client_change(tmp_path: Path) -> None:
    """Two `git format-patch` commits by team members: the holdings feature (the same as
    db-pool-exhaustion's), then a change to its client alone and its tests."""
    assert FEATURE.read_text() == (
        USE_CASE / "scenarios" / "db-pool-exhaustion" / "inject" / "01-holdings.patch"
    ).read_text().replace("[PATCH 1/2]", "[PATCH]")
    repo = _tree(tmp_path)
    log = git(repo, "log", "-2", "--format=%an <%ae>|%s").strip().splitlines()
    assert log == [
        "Tomás Ferreira <tomas.ferreira@shelfwise.io>|holdings: ask again when a count stalls",
        "Priya Raman <priya.raman@shelfwise.io>|"
        "Show where to borrow a book: GET /books/<id>/holdings",
    ]
    changed = set(git(repo, "show", "--name-only", "--format=", "HEAD").split())
    assert changed == {"bookshelf/holdings.py", "tests/test_holdings.py"}


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault, and neither the fix nor a negative is rejected by CI: the
    negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_negatives_change_no_test_the_workspace_has(patch: Path) -> None:
    """A negative that edited a hand-off test would be rejected by CI before the oracle saw
    it; each only changes code (and at most adds tests to the fault's own test file, which
    the hand-off set leaves to the agent: `ci_changed_tests`)."""
    assert patch.read_text().count("+++ b/")
    assert set(edited_tests(patch)) <= {"tests/test_holdings.py"}, edited_tests(patch)


def test_a_stalled_count_is_asked_again_until_its_second_is_spent_until_fixed(
    tmp_path: Path,
) -> None:
    """With the feature alone a stalled count is one ask; with the client change, one after
    another until its second is spent (~19 of these 50 ms stalls); the fix asks once."""
    assert _asks_per_stalled_count(_tree(tmp_path / "feature", faulted=False)) == 1.0
    assert _asks_per_stalled_count(_tree(tmp_path / "faulted")) >= 12
    assert _asks_per_stalled_count(_tree(tmp_path / "fixed", FIX)) == 1.0


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_every_negative_still_asks_stalled_counts_again(tmp_path: Path, patch: Path) -> None:
    """Three quick asks, a backoff between 0.1 s asks, more threads (the client as it
    was): each still abandons and resends three or more asks per stalled count."""
    assert _asks_per_stalled_count(_tree(tmp_path, patch)) >= 3


def test_scenario_pages_on_latency_against_the_hiccuping_network() -> None:
    """The paging alert is the p99 rule (bookshelf-api); the fault is baked in; the
    network runs the `holdings-hiccups` profile under `holdings-mix`; the page names the
    symptoms and neither an alert nor a cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert manifest.verify.scope == ["bookshelf-api"]
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "setup-baked"
    assert scenario.env.upstream_profile == "holdings-hiccups"
    assert scenario.env.load_profile == "holdings-mix"
    assert manifest.verify.ci_changed_tests == ["tests/test_holdings.py"]
    assert len(NEGATIVES) >= 2
    page = (SCENARIO / "trigger.md").read_text().lower()
    assert "slow" in page
    assert "book-metadata service" in page
    for tell in (manifest.expected.alert.lower(), "retr", "timeout", "timed out", "stall",
                 "ask again", "backoff", "budget", "storm", "revert", "roll back", "503",
                 "pause", "sync"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
