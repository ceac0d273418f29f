"""memory-leak-restarts on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the app's suite and its test client in a subprocess on each tree (the whole run
is `sreforge run memory-leak-restarts`, where the topology's memory limit kills the
worker). What the scenario claims here: on the faulted tree every new query string keeps
~800 KB for good, so the storm's searches (distinct queries, and the suggestion box's `_`
cache-buster) grow the process by tens of MB within a few hundred searches; the
reference fix keeps it flat; each negative leaves the growth (one bounds entries that
stay huge, the other recycles the worker, which the restarts rule sees as restarts).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, app_suite, git, paging_rule

SCENARIO = USE_CASE / "scenarios" / "memory-leak-restarts"
FAULT = SCENARIO / "inject" / "01-popular-searches.patch"
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))
RECYCLING = SCENARIO / "verify" / "negative" / "max-requests-recycling.patch"
SEARCHES = 100
"""Suggestion-box searches the probe sends (5 s of the storm's at 20/s)."""

# Growth of the resident set over SEARCHES searches as the web client's suggestion box
# sends them (the same query, a new `_` each time), and their answers' agreement.
_PROBE = """
import json, sys, httpx
from bookshelf import Settings, create_app
from bookshelf.seed import seed
seed(sys.argv[1], 300)
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://registry.test"),
                 upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
client = app.test_client()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
plain = client.get("/search?q=the&limit=2").get_json()
before = rss()
answers = [client.get(f"/search?q=the&limit=2&_={1764633600000 + 50 * n}").get_json()
           for n in range(int(sys.argv[2]))]
print(json.dumps({"grown_mb": (rss() - before) / 2**20,
                  "same_answers": all(a == plain for a in answers)}))
"""


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FAULT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _probe(repo: Path, tmp_path: Path) -> dict[str, float | bool]:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE, str(tmp_path / "probe.db"), str(SEARCHES)],
        cwd=repo, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, float | bool] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_fault_arrives_as_one_authored_commit(tmp_path: Path) -> None:
    """`git am` makes one commit by a team member: the popular-searches feature."""
    repo = _tree(tmp_path)
    author, subject = git(repo, "log", "-1", "--format=%an <%ae>%n%s").strip().splitlines()
    assert author == "Tomás Ferreira <tomas.ferreira@shelfwise.io>"
    assert subject.startswith("search: ")
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert changed == [
        "bookshelf/app.py", "bookshelf/popular.py", "bookshelf/search.py",
        "tests/test_popular.py",
    ]  # fmt: skip


@pytest.mark.timeout(300)
@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the leak (no test counts memory), and neither the fix nor a negative
    is rejected by CI: the negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


@pytest.mark.timeout(120)
def test_fault_keeps_hundreds_of_kilobytes_per_new_query_string(tmp_path: Path) -> None:
    """Every suggestion-box search is a new key of ~800 KB: 100 of them keep > 50 MB,
    and the answers themselves stay right (only memory shows the fault)."""
    found = _probe(_tree(tmp_path), tmp_path)
    assert found["grown_mb"] > 50
    assert found["same_answers"] is True


@pytest.mark.timeout(120)
def test_fix_keeps_memory_flat(tmp_path: Path) -> None:
    """With the reference fix the same searches are one key of 8 KiB: the process stays
    within a few MB of where it was, the answers unchanged."""
    found = _probe(_tree(tmp_path, FIX), tmp_path)
    assert found["grown_mb"] < 5
    assert found["same_answers"] is True


@pytest.mark.timeout(120)
@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_each_negative_leaves_the_growth(tmp_path: Path, patch: Path) -> None:
    """Bounding the number of searches (1,000 of ~800 KB is still ~800 MB) or recycling
    the worker (the app leaks as before) leave each process growing past the limit."""
    found = _probe(_tree(tmp_path, patch), tmp_path)
    assert found["grown_mb"] > 50


def test_recycling_negative_restarts_the_worker_every_few_seconds(tmp_path: Path) -> None:
    """`max-requests-recycling` recycles the worker after 100-120 requests: at the storm's
    20/s that is a new serving process every 5-6 s, more than two in any 30 s (the
    restarts rule's window at time scale 0.1), whatever the leak does."""
    config = (_tree(tmp_path, RECYCLING) / "gunicorn.conf.py").read_text()
    assert re.search(r"^max_requests = 100$", config, re.MULTILINE)
    assert re.search(r"^max_requests_jitter = 20$", config, re.MULTILINE)


def test_scenario_pages_on_the_restarts_rule() -> None:
    """The manifest's alert is the restarts rule of rules.yml (for bookshelf-api), the
    scenario sizes the service below its idle-plus-leak footprint, and the page names
    neither alert nor cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "changes(process_start_time_seconds" in rule["expr"]
    assert rule["expr"].rstrip().endswith("> 2")
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-deploy-recent"
    assert scenario.env.service_memory_limit_mb == 192
    page = (SCENARIO / "trigger.md").read_text().lower()
    for tell in (manifest.expected.alert.lower(), "memory", "leak", "oom", "popular",
                 "cache-buster", "limit", "killed"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
    assert tomllib.loads((SCENARIO / "scenario.toml").read_text())["id"] == SCENARIO.name
