"""decoy-deploy-control on the app itself: the override, the fix and the negatives, tree by tree.

No stack: the app's suite and its test client in a subprocess on each tree (the whole run
is `sreforge run decoy-deploy-control`). What the scenario claims here: with the runtime
override every search is shed with 503 whatever the latest commit; the reference fix
answers in full with the override still set; each negative leaves searches unanswered;
the override itself appears in no patch the workspace is built from, nor on the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, git, judged, paging_rule

SCENARIO = USE_CASE / "scenarios" / "decoy-deploy-control"
FEATURE = SCENARIO / "inject" / "01-shed-past-inflight-limit.patch"
DECOY = SCENARIO / "inject" / "02-log-deliberate-5xx.patch"
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))
HIDDEN = SCENARIO / "verify" / "ci"
VAR, VALUE = "BOOKSHELF_MAX_INFLIGHT_REQUESTS", "0"

# The app as the deployment runs it: settings from the environment, the override in it.
_PROBE = """
import json, os, sys, httpx
from bookshelf import Settings, create_app
from bookshelf.seed import seed
seed(sys.argv[1], 300)
os.environ["BOOKSHELF_DB_PATH"] = sys.argv[1]
app = create_app(Settings.from_env(),
                 upstream_transport=httpx.MockTransport(lambda r: httpx.Response(404)))
client = app.test_client()
out = {}
for url in sys.argv[2:]:
    response = client.get(url)
    out[url] = [response.status_code, response.get_json()]
print(json.dumps(out))
"""
SEARCH = "/search?q=the&limit=2"
LISTING = "/books?page=2&per_page=5"
HEALTH = "/healthz"


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FEATURE), str(DECOY))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _probe(repo: Path, tmp_path: Path, *, override: bool = True) -> dict[str, list[object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKSHELF_")}
    if override:
        env[VAR] = VALUE
    done = subprocess.run(
        [PYTHON, "-c", _PROBE, str(tmp_path / "probe.db"), SEARCH, LISTING, HEALTH],
        cwd=repo, capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers: dict[str, list[object]] = json.loads(done.stdout.splitlines()[-1])
    return answers


def test_inject_is_an_old_feature_then_an_innocent_recent_commit(tmp_path: Path) -> None:
    """Two authored commits: the shedding feature, then the decoy on the 5xx handler."""
    repo = _tree(tmp_path)
    log = git(repo, "log", "-2", "--format=%an <%ae>|%s").strip().splitlines()
    assert log == [
        "Priya Raman <priya.raman@shelfwise.io>|errors: log the 5xx we answer on purpose, "
        "with method and path",
        "Tomás Ferreira <tomas.ferreira@shelfwise.io>|Shed requests past a configurable "
        "in-flight limit",
    ]
    decoy = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert decoy == ["bookshelf/app.py"], "no test of its own: its revert passes CI"


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_and_hidden_ci_are_green_on_every_tree(
    tmp_path: Path, patch: Path | None
) -> None:
    """CI cannot see the fault (it is in no file), and neither the fix nor a negative is
    rejected by CI, hidden tests included: the negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo, capture_output=True, text=True, check=False, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    report = judged(repo, SCENARIO, "hidden", HIDDEN)
    assert report.count("passed") == len(report.cases) == 2, report.cases


def test_override_sheds_every_request_on_the_faulted_tree(tmp_path: Path) -> None:
    """With the override every search and listing is a fast 503; health still answers.
    Without it the same tree serves normally: the code alone is healthy."""
    repo = _tree(tmp_path)
    answers = _probe(repo, tmp_path)
    assert answers[SEARCH] == [503, {"error": "server busy, retry shortly"}]
    assert answers[LISTING][0] == 503
    assert answers[HEALTH][0] == 200
    (tmp_path / "probe.db").unlink()
    assert _probe(repo, tmp_path, override=False)[SEARCH][0] == 200


def test_fix_answers_in_full_with_the_override_still_set(tmp_path: Path) -> None:
    """The reference fix, override in place, answers exactly as the app without it."""
    repo = _tree(tmp_path, FIX)
    answers = _probe(repo, tmp_path)
    (tmp_path / "probe.db").unlink()
    assert answers == _probe(repo, tmp_path, override=False)
    assert answers[SEARCH][0] == 200
    assert answers[SEARCH][1]["count"] == 2  # type: ignore[index]


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_each_negative_leaves_searches_unanswered(tmp_path: Path, patch: Path) -> None:
    """Under the override: the decoy's revert and more threads still answer 503; the 429
    variant has no 5xx left for the rule but still refuses every search."""
    status, _ = _probe(_tree(tmp_path, patch), tmp_path)[SEARCH]
    assert status in (429, 503)


def test_revert_decoy_is_exactly_the_decoy_reverted(tmp_path: Path) -> None:
    """The mandatory negative undoes the latest commit and nothing else."""
    repo = _tree(tmp_path)
    git(repo, "apply", str(SCENARIO / "verify" / "negative" / "revert-decoy.patch"))
    assert git(repo, "diff", "HEAD~1", "--stat").strip() == ""


def test_the_override_leaves_no_trace_the_agent_can_read() -> None:
    """The manifest delivers it at runtime; the patches never set it; the page is neutral."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-runtime-notrace"
    assert (scenario.env.runtime_env_var, scenario.env.runtime_env_value) == (VAR, VALUE)
    for patch in (FEATURE, DECOY):
        assert f"{VAR}={VALUE}" not in patch.read_text(), patch.name
    page = (SCENARIO / "trigger.md").read_text().lower()
    for tell in (manifest.expected.alert.lower(), "503", "5xx", "shed", "limit", "in flight",
                 "in-flight", "environment", "override", "config", "busy", "deploy "):  # fmt: skip
        assert tell not in page, tell
    rule = paging_rule(manifest.expected.alert)
    assert 'status=~"5.."' in rule["expr"]
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
    assert tomllib.loads((SCENARIO / "scenario.toml").read_text())["id"] == SCENARIO.name
