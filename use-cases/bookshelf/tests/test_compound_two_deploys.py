"""compound-two-deploys on the app itself: the two deploys, the fix and the negatives, tree
by tree.

No stack: the app's suite and its test client in a subprocess on each tree (the whole run
is `sreforge run compound-two-deploys`). What the scenario claims here: the two faults are
two commits by two team members, days apart; each alone sends repeated searches to the
upstream (the latency the alert sees); the reference fix stops that for both; each
negative (the revert of the recent deploy, the cache bound alone) leaves one cause in.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, app_suite, git, paging_rule

SCENARIO = USE_CASE / "scenarios" / "compound-two-deploys"
OLDER, RECENT = sorted((SCENARIO / "inject").glob("*.patch"))
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))
REVERT_RECENT = SCENARIO / "verify" / "negative" / "revert-latest-deploy.patch"

# The storm's shape on the test seed: 80 distinct single-book searches (more editions
# than the 50-entry cache holds), once to warm, then twice more; prints the upstream
# calls the repeats made.
_PROBE = """
import json, sys, httpx
from bookshelf import Settings, create_app
from bookshelf.seed import seed
seed(sys.argv[1], 300)
calls = []
def answer(request):
    isbn = request.url.path.rsplit("/", 1)[-1]
    calls.append(isbn)
    return httpx.Response(200, json={"isbn": isbn, "title": "t", "authors": ["a"]})
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://registry.test"),
                 upstream_transport=httpx.MockTransport(answer))
client = app.test_client()
titles = []
for page in (1, 2, 3):
    items = client.get(f"/books?sort=title&per_page=100&page={page}").get_json()["items"]
    titles += [item["title"] for item in items]
unique = [t for t in dict.fromkeys(titles) if titles.count(t) == 1][:80]
for title in unique:
    client.get("/search", query_string={"q": title, "limit": "2"})
warm = len(calls)
for _ in range(2):
    for title in unique:
        hits = client.get("/search", query_string={"q": title, "limit": "2"}).get_json()
        assert hits["results"] and all(h["metadata"] for h in hits["results"]), hits
print(json.dumps({"searches": 2 * len(unique), "warm": warm, "repeat": len(calls) - warm}))
"""


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(OLDER), str(RECENT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _repeat_calls(repo: Path, tmp_path: Path) -> dict[str, int]:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE, str(tmp_path / "probe.db")],
        cwd=repo, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    counts: dict[str, int] = json.loads(done.stdout.splitlines()[-1])
    return counts


def test_faults_are_two_deploys_by_two_team_members_days_apart(tmp_path: Path) -> None:
    """Two `git format-patch` commits, different authors, the older dated ~6 days before
    the recent one (the spacing multi-commit keeps), each touching its own part."""
    repo = _tree(tmp_path)
    log = git(repo, "log", "-2", "--reverse", "--format=%an <%ae>|%s").strip().splitlines()
    assert log == [
        "Daniel Brandt <dbrandt@shelfwise.io>|cache: bound the metadata cache, evicting the "
        "least recently used",
        "Tomás Ferreira <tomas.ferreira@shelfwise.io>|search: look the top hit's edition up "
        "fresh on every search",
    ]
    dates = []
    for patch in (OLDER, RECENT):
        header = re.search(r"(?m)^Date: (.*)$", patch.read_text())
        assert header is not None
        dates.append(parsedate_to_datetime(header[1]))
    assert 5 <= (dates[1] - dates[0]).days <= 7
    changed = [
        git(repo, "show", "--name-only", "--format=", ref).split() for ref in ("HEAD~1", "HEAD")
    ]
    assert "bookshelf/cache.py" in changed[0]
    assert "bookshelf/search.py" not in changed[0]
    assert "bookshelf/search.py" in changed[1]
    assert "bookshelf/cache.py" not in changed[1]


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see either fault, and neither the fix nor a negative is rejected by CI:
    the negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


def test_each_deploy_alone_sends_repeated_searches_upstream(tmp_path: Path) -> None:
    """The older deploy alone (the recent one reverted): evictions send repeats upstream.
    The recent deploy alone (the bound raised): every repeat's top hit goes upstream."""
    older_alone = _repeat_calls(_tree(tmp_path / "older", REVERT_RECENT), tmp_path / "older")
    assert older_alone["repeat"] >= older_alone["searches"] // 4
    bound_raised = SCENARIO / "verify" / "negative" / "raise-cache-bound.patch"
    recent_alone = _repeat_calls(_tree(tmp_path / "recent", bound_raised), tmp_path / "recent")
    assert recent_alone["repeat"] >= recent_alone["searches"]
    both = _repeat_calls(_tree(tmp_path / "both"), tmp_path / "both")
    assert both["repeat"] > recent_alone["repeat"]


def test_fix_serves_every_repeated_search_from_the_cache(tmp_path: Path) -> None:
    """With the reference fix no repeated search reaches the upstream."""
    counts = _repeat_calls(_tree(tmp_path, FIX), tmp_path)
    assert counts["warm"] > 50
    assert counts["repeat"] == 0


def test_changed_tests_are_the_recent_deploys_own(tmp_path: Path) -> None:
    """`ci_changed_tests` names tests the recent deploy added, which the fix and the revert
    both remove (so CI does not hold their base versions against them)."""
    manifest = tomllib.loads((SCENARIO / "scenario.toml").read_text())
    changed = manifest["verify"]["ci_changed_tests"]
    names = {entry.split("::")[1] for entry in changed}
    recent = RECENT.read_text()
    for name in names:
        assert f"+def {name}(" in recent
        for patch in (FIX, REVERT_RECENT):
            assert f"-def {name}(" in patch.read_text(), (name, patch.name)


def test_scenario_pages_on_the_latency_rule_with_two_deploys() -> None:
    """The manifest's alert is the p99 rule (for bookshelf-api), delivery is multi-commit,
    one negative is the revert of the recent deploy alone, and the page names neither the
    alert nor a cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "multi-commit"
    assert REVERT_RECENT in NEGATIVES
    assert len(NEGATIVES) >= 2
    page = (SCENARIO / "trigger.md").read_text().lower()
    for tell in (manifest.expected.alert.lower(), "cache", "evict", "lru", "top hit", "fresh",
                 "deploys", "revert", "roll back", "rollback", "upstream", "metadata",
                 "days"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
    assert tomllib.loads((SCENARIO / "scenario.toml").read_text())["id"] == SCENARIO.name
