"""retry-storm on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the app's suite and its metadata client in a subprocess on each tree (the whole
run is `sreforge run retry-storm`; the upstream's side is `test_brownout_upstream.py`).
What the scenario claims here: the fault is one client commit whose tests stay green; on
it a lookup against a stalled service sends attempt after attempt until its 1.5 s are
spent (each one work the service still does); the reference sends at most two, and
about one retry per ten lookups once most stall; every negative still sends three or
more per lookup, and none edits a test the workspace already has.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, app_suite, edited_tests, git, paging_rule

pytestmark = pytest.mark.timeout(300)

SCENARIO = USE_CASE / "scenarios" / "retry-storm"
(FAULT,) = sorted((SCENARIO / "inject").glob("*.patch"))
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))

# Forty lookups at once against a service on which every attempt stalls (answered by a
# timeout after at most 50 ms, however long the attempt was given), with the client and
# the settings the deployment gives (no BOOKSHELF_UPSTREAM_TIMEOUT_SECONDS set): the
# attempts sent per lookup.
_ATTEMPTS = """
import threading, time
import httpx
from bookshelf import Settings
from bookshelf.metrics import build_instruments
from bookshelf.upstream import MetadataClient, UpstreamError

sent = []
def handle(request):
    sent.append(request.url.path)
    time.sleep(min(0.05, request.extensions["timeout"]["read"]))
    raise httpx.ReadTimeout("stalled", request=request)

settings = Settings.from_env({})
client = MetadataClient("http://metadata.test", settings.upstream_timeout_seconds,
                        build_instruments(), httpx.MockTransport(handle))
def lookup():
    try:
        client.fetch("9780591541281")
    except UpstreamError:
        pass
threads = [threading.Thread(target=lookup) for _ in range(40)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(sent) / len(threads))
"""


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FAULT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _attempts_per_stalled_lookup(repo: Path) -> float:
    done = subprocess.run(
        [PYTHON, "-c", _ATTEMPTS],
        cwd=repo, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


def test_fault_is_one_client_commit_by_a_team_member(tmp_path: Path) -> None:
    """A `git format-patch` commit touching the client, its settings' default, their README
    lines and a new test file, nothing on the search path or the cache."""
    repo = _tree(tmp_path)
    author, subject = git(repo, "log", "-1", "--format=%an <%ae>|%s").strip().split("|")
    assert author == "Priya Raman <priya.raman@shelfwise.io>"
    assert subject == "upstream: retry a stalled metadata lookup at once"
    changed = set(git(repo, "show", "--name-only", "--format=", "HEAD").split())
    assert changed == {
        "README.md",
        "bookshelf/config.py",
        "bookshelf/upstream.py",
        "tests/test_upstream.py",
    }


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault, and neither the fix nor a negative is rejected by CI: the
    negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_negatives_change_no_test_the_workspace_has(patch: Path) -> None:
    """A negative that edited a hand-off test would be rejected by CI before the oracle saw
    it; each only changes code (and at most adds a test file)."""
    assert patch.read_text().count("+++ b/")
    assert not edited_tests(patch), edited_tests(patch)


def test_a_stalled_lookup_is_resent_until_its_time_is_spent_until_fixed(tmp_path: Path) -> None:
    """Before the commit a stalled lookup is one attempt; on it, one after another until
    its 1.5 s are spent (~30 of these 50 ms stalls); the fix sends at most two, and
    within its budget little more than one per lookup when all of them stall."""
    assert _attempts_per_stalled_lookup(app_repo(tmp_path / "base")) == 1.0
    assert _attempts_per_stalled_lookup(_tree(tmp_path / "faulted")) >= 20
    assert _attempts_per_stalled_lookup(_tree(tmp_path / "fixed", FIX)) <= 1.4


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_every_negative_still_resends_stalled_lookups(tmp_path: Path, patch: Path) -> None:
    """A longer timeout (more attempts), three quick attempts, more threads (the client as
    it was): each still abandons and resends three or more attempts per stalled lookup."""
    assert _attempts_per_stalled_lookup(_tree(tmp_path, patch)) >= 3


def test_scenario_pages_on_latency_against_the_brownout_upstream() -> None:
    """The paging alert is the p99 rule (bookshelf-api); the upstream runs the `brownout`
    profile; the page names the symptoms and neither an alert nor a cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert manifest.verify.scope == ["bookshelf-api"]
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-deploy-recent"
    assert scenario.env.upstream_profile == "brownout"
    assert manifest.verify.ci_changed_tests == ["tests/test_upstream.py"]
    assert len(NEGATIVES) >= 2
    page = (SCENARIO / "trigger.md").read_text().lower()
    assert "slow" in page
    assert "book-metadata service" in page
    for tell in (manifest.expected.alert.lower(), "retr", "timeout", "timed out", "stall",
                 "backoff", "budget", "storm", "revert", "roll back", "503"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
