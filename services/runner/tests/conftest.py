"""Fixtures for the runner's tests: git workspaces (real bookshelf app when present), scenarios."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sreforge_runner import RunnerSettings

REPO_ROOT = Path(__file__).resolve().parents[3]
BOOKSHELF = REPO_ROOT / "use-cases" / "bookshelf"
BOOKSHELF_APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
BOOKSHELF_SCENARIO = BOOKSHELF / "scenarios" / "latency-cache-stampede"
_IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")

TINY_APP = {
    "app.py": "TTL = 1\n\n\ndef lookup(key):\n    return key\n",
    "README.md": "# Tiny\n",
}
TINY_FIX = "\n".join(
    [
        "diff --git a/app.py b/app.py",
        "--- a/app.py",
        "+++ b/app.py",
        "@@ -1,4 +1,4 @@",
        "-TTL = 1",
        "+TTL = 60",
        " ",
        " ",
        " def lookup(key):",
        "",
    ]
)
TINY_NEGATIVE = """\
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 # Tiny
+Cache notes.
"""


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a neutral identity; a failure shows git's message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME="Ada Brandt",
        GIT_AUTHOR_EMAIL="ada@example.org",
        GIT_COMMITTER_NAME="Ada Brandt",
        GIT_COMMITTER_EMAIL="ada@example.org",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
    )
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed in {repo}:\n{done.stderr}"
    return done.stdout


@dataclass(frozen=True)
class Project:
    """A run's world for the runner: a use-cases root with one scenario and a workspace."""

    use_cases: Path
    scenario_id: str
    scenario_dir: Path
    workspace: Path
    real: bool

    @property
    def fix(self) -> Path:
        """The scenario's reference fix."""
        return self.scenario_dir / "solution" / "fix.patch"

    @property
    def negative(self) -> Path:
        """The scenario's first negative fixture."""
        return sorted((self.scenario_dir / "verify" / "negative").glob("*.patch"))[0]


@pytest.fixture
def run_git() -> Callable[..., str]:
    """`git` as a fixture: (repo, *args) → stdout."""
    return git


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    """A tiny committed git repo."""
    repo = tmp_path / "tiny"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name, text in TINY_APP.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial import")
    return repo


def _tiny_project(tmp_path: Path, workspace: Path) -> Project:
    scenario = tmp_path / "use-cases" / "tiny" / "scenarios" / "tiny-slow"
    (scenario / "solution").mkdir(parents=True)
    (scenario / "verify" / "negative").mkdir(parents=True)
    (scenario / "solution" / "fix.patch").write_text(TINY_FIX)
    (scenario / "verify" / "negative" / "notes-only.patch").write_text(TINY_NEGATIVE)
    (scenario / "scenario.toml").write_text(
        'id = "tiny-slow"\nuse_case = "tiny"\nstack = "tiny"\nprofile = "incident"\n'
        'title = "Tiny"\nfamily = "latency"\ndifficulty = "easy"\n'
        '[expected]\nalert = "TinySlow"\np99_threshold_seconds = 0.3\np99_promql = "up"\n'
        "[inject]\n"
        '[verify]\npass_threshold = 0.85\nsignals = ["ci_green"]\nweights = { ci_green = 1.0 }\n'
    )
    return Project(tmp_path / "use-cases", "tiny-slow", scenario, workspace, real=False)


def _bookshelf_project(tmp_path: Path) -> Project | None:
    inject = sorted((BOOKSHELF_SCENARIO / "inject").glob("*.patch"))
    fix = BOOKSHELF_SCENARIO / "solution" / "fix.patch"
    negatives = sorted((BOOKSHELF_SCENARIO / "verify" / "negative").glob("*.patch"))
    if not (BOOKSHELF_APP.is_dir() and inject and fix.is_file() and negatives):
        return None
    use_cases = tmp_path / "use-cases"
    scenario = use_cases / "bookshelf" / "scenarios" / BOOKSHELF_SCENARIO.name
    shutil.copytree(BOOKSHELF_SCENARIO, scenario)
    workspace = tmp_path / "run" / "workspace"
    shutil.copytree(BOOKSHELF_APP, workspace, ignore=_IGNORED)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "Import the reading-list API")
    for patch in inject:
        git(workspace, "am", "-q", str(patch))
    return Project(use_cases, BOOKSHELF_SCENARIO.name, scenario, workspace, real=True)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """The real bookshelf scenario and its faulted app repo when present, else a tiny one."""
    found = _bookshelf_project(tmp_path)
    if found is not None:
        return found
    workspace = tmp_path / "run" / "workspace"
    workspace.parent.mkdir(parents=True)
    workspace.mkdir()
    git(workspace, "init", "-q", "-b", "main")
    for name, text in TINY_APP.items():
        (workspace / name).write_text(text)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "Initial import")
    return _tiny_project(tmp_path, workspace)


@pytest.fixture
def settings(project: Project, tmp_path: Path) -> RunnerSettings:
    """Runner settings over the project's use-cases root and the repo's catalog, with a
    private readiness store and a short kill grace."""
    return RunnerSettings(
        use_cases_root=project.use_cases,
        agents_dir=REPO_ROOT / "agents",
        readiness_dir=tmp_path / "readiness",
        kill_grace_seconds=0.5,
    )
