"""bad-deploy-5xx on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the app's suite and its test client in a subprocess on each tree (the whole run
is `sreforge run bad-deploy-5xx`). What the scenario claims here: the fault answers 500
only to requests carrying a parameter the new rules table does not know; the reference
fix answers them in full; each negative clears the 5xx but not the answer.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, STACK, USE_CASE, app_repo, app_suite, git, paging_rule

SCENARIO = USE_CASE / "scenarios" / "bad-deploy-5xx"
FAULT = SCENARIO / "inject" / "01-query-args-table.patch"
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))

# Plain, and as the web client's suggestion box sends it (search-suggest's `_`).
_PROBE = """
import json, sys, httpx
from bookshelf import Settings, create_app
from bookshelf.seed import seed
seed(sys.argv[1], 300)
app = create_app(Settings(db_path=sys.argv[1], upstream_url="http://registry.test"),
                 upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
client = app.test_client()
out = {}
for url in sys.argv[2:]:
    response = client.get(url)
    out[url] = [response.status_code, response.get_json()]
print(json.dumps(out))
"""
PLAIN = "/search?q=the&limit=2"
BUSTED = "/search?q=the&limit=2&_=1764633600050"
LISTING = "/books?page=2&per_page=5&_=1764633600050"


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FAULT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _probe(repo: Path, tmp_path: Path) -> dict[str, list[object]]:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE, str(tmp_path / "probe.db"), PLAIN, BUSTED, LISTING],
        cwd=repo, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers: dict[str, list[object]] = json.loads(done.stdout.splitlines()[-1])
    return answers


def test_fault_arrives_as_one_authored_commit(tmp_path: Path) -> None:
    """`git am` makes one commit by a team member, touching the query-string parsing."""
    repo = _tree(tmp_path)
    author, subject = git(repo, "log", "-1", "--format=%an <%ae>%n%s").strip().splitlines()
    assert author == "Priya Raman <priya.raman@shelfwise.io>"
    assert subject.startswith("validation: ")
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert changed == [
        "bookshelf/books.py", "bookshelf/search.py", "bookshelf/validation.py",
        "tests/test_validation.py",
    ]  # fmt: skip


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault (no test sends an unknown parameter), and neither the fix
    nor a negative is rejected by CI: the negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


def test_fault_answers_500_only_to_a_parameter_without_a_rule(tmp_path: Path) -> None:
    """Plain searches answer; the same search with `_` (and a listing with it) is a 500."""
    answers = _probe(_tree(tmp_path), tmp_path)
    assert answers[PLAIN][0] == 200
    assert answers[PLAIN][1]["count"] == 2  # type: ignore[index]
    assert answers[BUSTED] == [500, {"error": "internal error"}]
    assert answers[LISTING][0] == 500


def test_fix_answers_the_suggestion_box_in_full(tmp_path: Path) -> None:
    """With the reference fix the busted search gets exactly the plain search's answer."""
    answers = _probe(_tree(tmp_path, FIX), tmp_path)
    assert answers[BUSTED] == answers[PLAIN]
    assert answers[PLAIN][0] == 200
    assert answers[LISTING][0] == 200


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_each_negative_clears_the_500_but_not_the_answer(tmp_path: Path, patch: Path) -> None:
    """No 5xx left for the error-rate rule, but the suggestion box's searches still do not
    get their hits: an empty 200 (degraded to the load's check) or a 400 (failed)."""
    answers = _probe(_tree(tmp_path, patch), tmp_path)
    status, body = answers[BUSTED]
    assert status != 500
    assert status != 200 or body["count"] == 0  # type: ignore[index]
    assert answers[BUSTED] != answers[PLAIN]


def test_scenario_pages_on_the_error_rate_rule() -> None:
    """The manifest's alert is the 5xx-ratio rule of rules.yml (for bookshelf-api), the
    load profile is one the load generator knows, and the page names neither alert nor
    cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert 'status=~"5.."' in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-deploy-recent"
    profiles = (STACK / "loadgen" / "loadgen" / "_profiles.py").read_text()
    known = re.search(r"PROFILE_NAMES = \((.*?)\)", profiles, re.DOTALL)
    assert known is not None
    assert f'"{scenario.env.load_profile}"' in known[1]
    page = (SCENARIO / "trigger.md").read_text().lower()
    for tell in (manifest.expected.alert.lower(), "500", "5xx", "validation", "parameter",
                 "cache-buster", "keyerror", "query string"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
    assert tomllib.loads((SCENARIO / "scenario.toml").read_text())["id"] == SCENARIO.name
