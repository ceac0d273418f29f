"""db-pool-exhaustion on the app itself: the faults, the fix and the negatives, tree by tree.

No stack: the workspace's real history (both commits baked in), the app's suite, and
probes in a subprocess on each tree (the whole run is `sreforge run db-pool-exhaustion`,
on the Postgres mode). What the scenario claims here: the two commits sit inside the
history, not on top; the faulted tree pools one connection per worker with a 0.5 s wait
and keeps the request's connection through the holdings call; the reference gives it
back before the call and pools four; every negative leaves one connection held through
the call; CI stays green on every tree, no negative edits a test the workspace has; and
the load's truth is what the app answers.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import ModuleType

import pytest
from sreforge_contracts import load_scenario
from sreforge_deployer import Workspace

from .conftest import APP, PYTHON, USE_CASE, app_suite, edited_tests, git, paging_rule

pytestmark = pytest.mark.timeout(300)

SCENARIO = USE_CASE / "scenarios" / "db-pool-exhaustion"
FAULTS = sorted((SCENARIO / "inject").glob("*.patch"))
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))

# How the tree's app behaves: its pool settings for a database URL, and whether a
# holdings request still holds its connection while the network is asked.
_PROBE = """
import json, sys, httpx
from flask import g
from bookshelf import Settings, create_app
from bookshelf.postgres import PostgresSettings
from bookshelf.seed import seed
seed(sys.argv[1], 50)
held = []
def network(request):
    held.append("db" in g)
    return httpx.Response(200, json={"isbn": "x", "libraries": 3, "available": 1})
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://metadata.test"),
                 upstream_transport=httpx.MockTransport(network))
status = app.test_client().get("/books/1/holdings").status_code
pool = PostgresSettings.from_env({"BOOKSHELF_DATABASE_URL": "host=db"})
print(json.dumps({"status": status, "held": held, "size": pool.pool_size,
                  "timeout": pool.pool_timeout_seconds}))
"""
# The app's answers to the load's first holdings requests over the seeded library, the
# network answering as bookmeta does.
_ANSWERS = """
import json, sys, httpx
sys.path.append(sys.argv[3])
from bookmeta import holdings
from bookshelf import Settings, create_app
def network(request):
    return httpx.Response(200, json=holdings(request.url.path.rsplit("/", 1)[-1]))
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://metadata.test"),
                 upstream_transport=httpx.MockTransport(network))
client = app.test_client()
print(json.dumps({path: client.get(path).get_data(as_text=True)
                  for path in json.loads(sys.argv[2])}))
"""


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=FAULTS)
    if patch is not None:
        git(workspace.path, "apply", str(patch))
    return workspace.path


def _probe(repo: Path, tmp_path: Path) -> dict[str, object]:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE, str(tmp_path / "probe.db")],
        cwd=repo, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_faults_are_two_old_commits_inside_the_history(tmp_path: Path) -> None:
    """setup-baked: the holdings feature and the pool change are the third and second
    commits below HEAD, by two team members; the latest commits touch no code."""
    repo = _tree(tmp_path)
    log = git(repo, "log", "--format=%an|%s", "HEAD~2", "-2").splitlines()
    assert log == [
        "Ines Duarte|postgres: one connection per worker (reduce connection footprint)",
        "Priya Raman|Show where to borrow a book: GET /books/<id>/holdings",
    ]
    assert git(repo, "show", "--name-only", "--format=", "HEAD~2").split() == [
        "bookshelf/postgres.py"
    ]
    recent = git(repo, "show", "--name-only", "--format=", "HEAD~1", "HEAD").split()
    assert not any(path.startswith("bookshelf/") for path in recent)


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault (its tests run on SQLite, one request at a time), and
    neither the fix nor a negative is rejected by CI: the negatives are the oracle's."""
    app_suite(_tree(tmp_path, patch))


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_negatives_change_no_test_the_workspace_has(patch: Path) -> None:
    """A negative that edited a hand-off test would be rejected by CI before the oracle saw
    it; each only changes code."""
    assert patch.read_text().count("+++ b/")
    assert not edited_tests(patch), edited_tests(patch)


def test_the_connection_is_held_through_the_call_until_fixed(tmp_path: Path) -> None:
    """Faulted: a pool of one, a 0.5 s wait, the connection held while the network is
    asked. Fixed: four, the same wait, given back before the call."""
    faulted = _probe(_tree(tmp_path / "faulted"), tmp_path / "faulted")
    assert faulted == {"status": 200, "held": [True], "size": 1, "timeout": 0.5}
    fixed = _probe(_tree(tmp_path / "fixed", FIX), tmp_path / "fixed")
    assert fixed == {"status": 200, "held": [False], "size": 4, "timeout": 0.5}


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_every_negative_keeps_one_connection_held_through_the_call(
    tmp_path: Path, patch: Path
) -> None:
    """A longer wait, more threads or a shorter call: still one connection per worker,
    still held while the network is asked."""
    found = _probe(_tree(tmp_path, patch), tmp_path)
    assert (found["size"], found["held"]) == (1, [True])


def test_the_loads_truth_is_what_the_app_answers(
    tmp_path: Path, loadgen: ModuleType, library: Path
) -> None:
    """The load's first 200 requests, answered by the faulted app over the seeded library
    with the network answering as bookmeta does: every answer `ok` (the book, its counts,
    the listing page)."""
    mix = loadgen.profile_named("holdings-mix", library, 1)
    sent = [mix.request(n) for n in range(200)]
    paths = [
        path if not params else f"{path}?{'&'.join(f'{k}={v}' for k, v in params.items())}"
        for path, params in sent
    ]
    upstream = str(USE_CASE / "stacks" / "bookshelf-flask" / "upstream")
    sent_at = time.time()
    done = subprocess.run(
        [PYTHON, "-c", _ANSWERS, str(library), json.dumps(paths), upstream],
        cwd=_tree(tmp_path), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    verdicts = [
        mix.check(request, answers[path].encode(), sent_at)
        for request, path in zip(sent, paths, strict=True)
    ]
    assert verdicts == ["ok"] * len(sent)


def test_scenario_pages_on_latency_on_the_postgres_mode() -> None:
    """The paging alert is the p99 rule (bookshelf-api); the library on PostgreSQL, the
    holdings-mix load, both commits baked in."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    env = dict(
        line.split("=", 1)
        for line in (SCENARIO / "environment" / "scenario.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env["DATABASE"] == "postgres"
    assert env["LOAD_PROFILE"] == "holdings-mix"
    assert env["DELIVERY_MODE"] == "setup-baked"
