"""missing-index-migration on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the workspace's real history (with the fault baked in), the app's suite, and a
probe in a subprocess on each tree (the whole run is `sreforge run
missing-index-migration`). What the scenario claims here: the cleanup commit sits inside
the history, not on top; a library seeded by the faulted tree has no per-book index and
its progress lookup scans the table; the reference fix brings the index back on that
same, already-migrated library; the revert does not; the other negatives leave the plan
as it is; and answers are the same on every tree.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections import OrderedDict
from pathlib import Path
from types import ModuleType

import pytest
from sreforge_contracts import load_scenario
from sreforge_deployer import Workspace

from .conftest import APP, PYTHON, STACK, USE_CASE, app_suite, git, paging_rule

SCENARIO = USE_CASE / "scenarios" / "missing-index-migration"
FAULT = SCENARIO / "inject" / "01-schema-cleanup.patch"
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))
REVERT = SCENARIO / "verify" / "negative" / "revert-schema-cleanup.patch"
CACHE = SCENARIO / "verify" / "negative" / "cache-search-results.patch"

# Seed with one tree, then open the same file with another (a redeploy on a live library).
_SEED = """
import sys
from bookshelf.seed import seed
seed(sys.argv[1], 400, 1, 20)
"""
_PROBE = """
import json, sys, httpx
from bookshelf import Settings, create_app
from bookshelf.db import CURRENT_PAGE, connect
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://registry.test"),
                 upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
client = app.test_client()
conn = connect(sys.argv[1])
plan = [r["detail"] for r in conn.execute(
    f"EXPLAIN QUERY PLAN SELECT ({CURRENT_PAGE}) FROM books WHERE id = 1")]
indexes = sorted(r[0] for r in conn.execute(
    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'reading_progress'"))
answer = client.get("/search?q=dune&limit=2").get_json()
print(json.dumps({"plan": plan, "indexes": indexes, "answer": answer}))
"""


def _baked(tmp_path: Path, patch: Path | None = None) -> Workspace:
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=[FAULT])
    if patch is not None:
        git(workspace.path, "apply", str(patch))
    return workspace


def _run(repo: Path, script: str, *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "-c", script, *args], cwd=repo, capture_output=True, text=True, check=False,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _library(tmp_path: Path) -> tuple[Workspace, str]:
    """The faulted workspace and a library seeded by it, as a run's set-up leaves them."""
    workspace = _baked(tmp_path)
    library = str(tmp_path / "library.db")
    _run(workspace.path, _SEED, library)
    return workspace, library


def _probe(repo: Path, library: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(_run(repo, _PROBE, library).splitlines()[-1])
    return found


def _scans(plan: object) -> bool:
    assert isinstance(plan, list)
    return any(str(d).startswith("SCAN p") for d in plan)


def test_fault_is_an_old_commit_inside_the_history(tmp_path: Path) -> None:
    """setup-baked: the cleanup is two commits below HEAD, by a team member, and adds only
    a new migration; the latest commits are unrelated."""
    workspace = _baked(tmp_path)
    author, subject = git(workspace.path, "log", "-1", "--format=%an%n%s", "HEAD~2").splitlines()
    assert author == "Tomás Ferreira"
    assert subject == "db: schema cleanup for reading_progress"
    changed = git(workspace.path, "show", "--name-only", "--format=", "HEAD~2").split()
    assert changed == ["bookshelf/migrations/0003_schema_cleanup.sql"]
    recent = git(workspace.path, "show", "--name-only", "--format=", "HEAD~1", "HEAD").split()
    assert not any(path.startswith("bookshelf/") for path in recent)


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault (small test data, no plan checks), and neither the fix nor
    a negative is rejected by CI, in either of its test sets (the tests as submitted, and
    the hand-off commit's tests against the submitted code): the negatives are the
    oracle's to fail."""
    workspace = _baked(tmp_path, patch)
    app_suite(workspace.path)
    git(workspace.path, "checkout", "HEAD", "--", "tests")
    git(workspace.path, "clean", "-qfd", "--", "tests")
    app_suite(workspace.path)


def test_faulted_library_has_no_per_book_index(tmp_path: Path) -> None:
    """The seed runs the faulted tree's migrations: the lookup scans and sorts the table."""
    workspace, library = _library(tmp_path)
    found = _probe(workspace.path, library)
    assert found["indexes"] == []
    assert _scans(found["plan"])
    assert any("TEMP B-TREE" in str(d) for d in found["plan"])  # type: ignore[attr-defined]


def test_fix_restores_the_index_on_the_live_library(tmp_path: Path) -> None:
    """The redeployed build migrates the already-faulted library: the lookup seeks again,
    and the answer is the faulted build's answer."""
    workspace, library = _library(tmp_path)
    before = _probe(workspace.path, library)
    git(workspace.path, "apply", str(FIX))
    after = _probe(workspace.path, library)
    assert after["indexes"] == ["ix_reading_progress_book"]
    assert not _scans(after["plan"])
    assert after["answer"] == before["answer"]


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_each_negative_leaves_the_live_library_unindexed(tmp_path: Path, patch: Path) -> None:
    """On the library the faulted build migrated, no negative brings the index back (the
    revert included: 0003 is recorded as applied), and answers stay the same."""
    workspace, library = _library(tmp_path)
    before = _probe(workspace.path, library)
    git(workspace.path, "apply", str(patch))
    after = _probe(workspace.path, library)
    assert after["indexes"] == []
    assert _scans(after["plan"])
    assert after["answer"] == before["answer"]


def test_the_revert_would_only_work_on_a_library_it_never_ran_on(tmp_path: Path) -> None:
    """A fresh file migrated by the reverted tree keeps the index: the revert looks right
    in a test database, which is why CI passes it."""
    workspace = _baked(tmp_path, REVERT)
    library = str(tmp_path / "fresh.db")
    _run(workspace.path, _SEED, library)
    assert _probe(workspace.path, library)["indexes"] == ["ix_reading_progress_book"]


def test_scenario_pages_on_the_latency_rule() -> None:
    """The manifest's alert is the p99 rule of rules.yml (for bookshelf-api), delivery is
    setup-baked, the load profile is one the load generator knows, and the page names
    neither the alert nor the cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "setup-baked"
    profiles = (STACK / "loadgen" / "loadgen" / "_profiles.py").read_text()
    known = re.search(r"PROFILE_NAMES = \((.*?)\)", profiles, re.DOTALL)
    assert known is not None
    assert f'"{scenario.env.load_profile}"' in known[1]
    page = (SCENARIO / "trigger.md").read_text().lower()
    for tell in (manifest.expected.alert.lower(), "index", "migration", "schema", "progress",
                 "sqlite", "cleanup", "p99"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
    assert tomllib.loads((SCENARIO / "scenario.toml").read_text())["id"] == SCENARIO.name


def _cache_answers(sequence: list[str], size: int, ttl: float, period: float) -> list[bool]:
    """Whether an LRU of `size` answers kept `ttl` seconds, keyed on the raw query, answers
    each search of `sequence`, one every `period` seconds (the negative's cache, replayed)."""
    cache: OrderedDict[str, float] = OrderedDict()
    answered = []
    for k, query in enumerate(sequence):
        now = k * period
        stored = cache.get(query)
        answered.append(stored is not None and now - stored < ttl)
        if not answered[-1]:
            cache[query] = now
        cache.move_to_end(query)
        while len(cache) > size:
            cache.popitem(last=False)
    return answered


@pytest.mark.timeout(180)
def test_a_cache_of_search_answers_misses_the_search_page(
    loadgen: ModuleType, library: Path
) -> None:
    """The cache negative fails on the load, not by luck: replayed on the search page's own
    sequence (seed 1, 20 requests/s), its LRU answers no search page (each miss still
    ~0.4 s of scans), so every 3 s alert window of the negative's build keeps its slow
    searches."""
    text = CACHE.read_text()
    size = int(re.search(r"_SEARCH_CACHE_SIZE = (\d+)", text)[1])  # type: ignore[index]
    ttl = float(re.search(r"_SEARCH_CACHE_TTL_SECONDS = ([\d.]+)", text)[1])  # type: ignore[index]
    env = (SCENARIO / "environment" / "scenario.env").read_text()
    rate = float(re.search(r"^LOAD_RATE=(\d+)", env, re.M)[1])  # type: ignore[index]
    profile = loadgen.profile_named("search-page-mix", library, 1)
    every = loadgen.PAGE_SEARCH_EVERY
    sequence = [profile.search_page.query(k) for k in range(3000)]
    answered = _cache_answers(sequence, size, ttl, every / rate)
    assert not any(answered)
