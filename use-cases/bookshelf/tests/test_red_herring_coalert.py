"""red-herring-coalert on the app itself: the fault, the fix and the negatives, tree by tree.

No stack: the app's suite and its settings in a subprocess on each tree (the whole run is
`sreforge run red-herring-coalert`). What the scenario claims here: the fault is one
config commit whose tests stay green; on it the deployment's old variable
(`BOOKSHELF_CACHE_TTL_SECONDS=300`) becomes a 0.3 s cache TTL; the reference fix gives
the cache its 300 s back; every negative leaves the 0.3 s TTL in place, touching only
the upstream's side or a default the deployment overrides, and none edits a test the
workspace already has. The co-alert is the upstream's, outside the oracle's scope.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from .conftest import PYTHON, USE_CASE, app_repo, app_suite, edited_tests, git, paging_rule

pytestmark = pytest.mark.timeout(300)

SCENARIO = USE_CASE / "scenarios" / "red-herring-coalert"
(FAULT,) = sorted((SCENARIO / "inject").glob("*.patch"))
FIX = SCENARIO / "solution" / "fix.patch"
NEGATIVES = sorted((SCENARIO / "verify" / "negative").glob("*.patch"))
HERRING = "BookmetaErrorsElevated"

# The settings as the deployment's environment gives them (stack.toml's scaled_env at
# time scale 1; the upstream timeout is not set there).
_SETTINGS = """
from bookshelf import Settings
settings = Settings.from_env({"BOOKSHELF_CACHE_TTL_SECONDS": "300"})
print(settings.cache_ttl_seconds)
"""


def _tree(tmp_path: Path, patch: Path | None = None) -> Path:
    repo = app_repo(tmp_path / "app")
    git(repo, "am", "-q", str(FAULT))
    if patch is not None:
        git(repo, "apply", str(patch))
    return repo


def _deployed_ttl(repo: Path) -> float:
    done = subprocess.run(
        [PYTHON, "-c", _SETTINGS],
        cwd=repo, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


def test_fault_is_one_config_commit_by_a_team_member(tmp_path: Path) -> None:
    """A `git format-patch` commit touching the settings, their README lines and their new
    tests, nothing on the search path itself."""
    repo = _tree(tmp_path)
    author, subject = git(repo, "log", "-1", "--format=%an <%ae>|%s").strip().split("|")
    assert author == "Mateo Arriaga <mateo.arriaga@shelfwise.io>"
    assert subject.startswith("config: durations with units")
    changed = set(git(repo, "show", "--name-only", "--format=", "HEAD").split())
    assert changed == {"README.md", "bookshelf/config.py", "tests/test_config.py"}


@pytest.mark.parametrize("patch", [None, FIX, *NEGATIVES], ids=lambda p: p.stem if p else "faulted")
def test_app_suite_is_green_on_every_tree(tmp_path: Path, patch: Path | None) -> None:
    """CI cannot see the fault, and neither the fix nor a negative is rejected by CI: the
    negatives are the oracle's to fail."""
    repo = _tree(tmp_path, patch)
    app_suite(repo)


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_negatives_change_no_test_the_workspace_has(patch: Path) -> None:
    """A negative that edited a hand-off test would be rejected by CI before the oracle saw
    it; each only adds code (and at most a new test file)."""
    assert patch.read_text().count("+++ b/")
    assert not edited_tests(patch), edited_tests(patch)


def test_deployment_ttl_is_read_as_milliseconds_until_fixed(tmp_path: Path) -> None:
    """Before the commit 300 means 300 s; on it 0.3 s; the fix gives the 300 s back."""
    assert _deployed_ttl(app_repo(tmp_path / "base")) == 300.0
    assert _deployed_ttl(_tree(tmp_path / "faulted")) == pytest.approx(0.3)
    assert _deployed_ttl(_tree(tmp_path / "fixed", FIX)) == 300.0


@pytest.mark.parametrize("patch", NEGATIVES, ids=lambda p: p.stem)
def test_every_negative_keeps_the_sub_second_ttl(tmp_path: Path, patch: Path) -> None:
    """Blaming the upstream (retries, a breaker, a shorter timeout) or raising a default
    the deployment overrides leaves the cache forgetting every entry within a second."""
    assert _deployed_ttl(_tree(tmp_path, patch)) == pytest.approx(0.3)


def test_scenario_pages_on_latency_while_the_upstream_co_alerts() -> None:
    """The paging alert is the p99 rule (bookshelf-api); the upstream runs the flaky
    profile, whose error rule names bookmeta, outside the oracle's scope; the page names
    both symptoms and neither an alert nor a cause."""
    scenario = load_scenario(SCENARIO)
    manifest = scenario.manifest
    assert manifest.expected is not None
    rule = paging_rule(manifest.expected.alert)
    assert "histogram_quantile(0.99" in rule["expr"]
    assert rule["labels"] == {"severity": manifest.expected.severity, "service": "bookshelf-api"}
    herring = paging_rule(HERRING)
    assert herring["labels"]["service"] == "bookmeta"
    assert manifest.verify.scope == ["bookshelf-api"]
    assert scenario.env is not None
    assert scenario.env.delivery_mode == "arm-deploy-recent"
    assert scenario.env.upstream_profile == "flaky-lookups"
    assert manifest.verify.ci_changed_tests == ["tests/test_config.py"]
    assert len(NEGATIVES) >= 2
    page = (SCENARIO / "trigger.md").read_text().lower()
    assert "slow" in page
    assert "book-metadata service" in page
    for tell in (manifest.expected.alert.lower(), HERRING.lower(), "cache", " ttl",
                 "config", "millisecond", "unit", "revert", "roll back", "503"):  # fmt: skip
        assert tell not in page, tell
    oracle = (SCENARIO / "verify" / "oracle.md").read_text()
    assert "## Root cause (harness-internal)" in oracle
