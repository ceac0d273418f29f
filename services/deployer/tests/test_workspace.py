"""The run workspace: realistic, deterministic history; faults per delivery mode; no tells."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sreforge_deployer import Workspace, WorkspaceError
from sreforge_deployer._delivery import deliver_at_arm
from sreforge_deployer._history import SETUP_BAKED_TAIL
from sreforge_deployer._spec import ScenarioSetup
from sreforge_deployer._workspace import source_files

from .conftest import BOOKSHELF, STAMPEDE

APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
TELLS = re.compile(
    r"\b(sreforge\w*|scenarios?|inject\w*|faults?|oracles?|solutions?|harness\w*|benchmark\w*)\b",
    re.IGNORECASE,
)


def _dates(workspace: Workspace) -> list[datetime]:
    lines = workspace.git("log", "--reverse", "--format=%aI").splitlines()
    return [datetime.fromisoformat(line) for line in lines]


@pytest.fixture(scope="module")
def change_series(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two `git format-patch` mboxes editing the app, as a maintainer would send them."""
    scratch = tmp_path_factory.mktemp("patch")
    workspace = Workspace.build(APP, scratch / "repo")
    env = {
        "GIT_AUTHOR_NAME": "Priya Raman",
        "GIT_AUTHOR_EMAIL": "priya.raman@shelfwise.io",
        "GIT_COMMITTER_NAME": "Priya Raman",
        "GIT_COMMITTER_EMAIL": "priya.raman@shelfwise.io",
    }
    for name, line, message in [
        ("config.py", "MAX_PAGE_SIZE = 200", "Cap the page size at 200"),
        ("validation.py", "MIN_QUERY_LENGTH = 2", "Require two characters for a query"),
    ]:
        target = workspace.path / "bookshelf" / name
        target.write_text(target.read_text() + f"\n{line}\n")
        workspace.git("commit", "-qam", message, env=env)
    out = scratch / "series"
    workspace.git("format-patch", "-q", "-2", "-o", str(out))
    return sorted(out.glob("*.patch"))


@pytest.fixture(scope="module")
def change_patch(change_series: list[Path]) -> Path:
    """The first patch of the series alone."""
    return change_series[0]


def test_history_is_realistic_and_complete(tmp_path: Path) -> None:
    """Several authors over weeks, sensible messages, and the tree equals the app source."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    authors = set(workspace.git("log", "--format=%an <%ae>").splitlines())
    dates = _dates(workspace)
    assert len(authors) >= 3
    assert dates == sorted(dates), "commit dates increase along the history"
    assert dates[-1] - dates[0] >= timedelta(weeks=3)
    assert len(dates) >= 5
    assert sorted(workspace.git("ls-files").splitlines()) == source_files(APP)
    for relative in source_files(APP):
        assert (workspace.path / relative).read_bytes() == (APP / relative).read_bytes()
    assert workspace.git("status", "--porcelain") == ""


def test_history_is_deterministic(tmp_path: Path) -> None:
    """The same source yields the same commit ids, so a base commit can be pinned."""
    first = Workspace.build(APP, tmp_path / "one").head()
    assert Workspace.build(APP, tmp_path / "two").head() == first


def test_setup_baked_fault_sits_inside_the_history(tmp_path: Path, change_patch: Path) -> None:
    """setup-baked: the change is an old commit, followed by ordinary ones, dated in order."""
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=[change_patch])
    subjects = workspace.git("log", "--format=%s").splitlines()
    assert subjects.index("Cap the page size at 200") == SETUP_BAKED_TAIL
    assert _dates(workspace) == sorted(_dates(workspace))
    assert "MAX_PAGE_SIZE = 200" in (workspace.path / "bookshelf" / "config.py").read_text()
    assert workspace.git("log", "-1", "--format=%an", "HEAD~2") == "Priya Raman"


def test_recent_delivery_is_dated_now(tmp_path: Path, change_patch: Path) -> None:
    """arm-deploy-recent: the change lands on top, authored by the patch's author, at now."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    before = workspace.head()
    (commit,) = workspace.deliver_recent([change_patch])
    assert workspace.head() == commit
    assert workspace.git("rev-parse", "HEAD~1") == before
    when = datetime.fromisoformat(workspace.git("log", "-1", "--format=%cI"))
    assert abs(datetime.now(UTC) - when) < timedelta(minutes=1)
    assert workspace.git("log", "-1", "--format=%an|%cn") == "Priya Raman|Priya Raman"


def test_multi_commit_delivery_keeps_order_and_increasing_dates(
    tmp_path: Path, change_series: list[Path]
) -> None:
    """Ordered patches become ordered commits with strictly increasing dates ending now."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    workspace.deliver_recent(change_series)
    dates = _dates(workspace)
    assert dates[-2] < dates[-1]
    assert abs(datetime.now(UTC) - dates[-1]) < timedelta(minutes=1)
    assert workspace.git("log", "-2", "--format=%s").splitlines() == [
        "Require two characters for a query",
        "Cap the page size at 200",
    ]


def _redated(series: list[Path], dates: list[str], dest: Path) -> list[Path]:
    """Copies of `series` whose `Date:` headers read `dates` (as a mailer would stamp them)."""
    dest.mkdir()
    out = []
    for patch, date in zip(series, dates, strict=True):
        text = re.sub(r"(?m)^Date: .*$", f"Date: {date}", patch.read_text(), count=1)
        (dest / patch.name).write_text(text)
        out.append(dest / patch.name)
    return out


def test_multi_commit_series_lands_as_far_apart_as_its_patches_are_dated(
    tmp_path: Path, change_series: list[Path]
) -> None:
    """multi-commit: two deploys 5 days 6 hours apart in the patches' `Date:` headers become
    two commits that far apart, the older first, the recent one at the arm time, both
    in the tree and after the history."""
    series = _redated(
        change_series,
        ["Thu, 26 Nov 2026 09:12:40 +0100", "Tue, 1 Dec 2026 15:12:40 +0100"],
        tmp_path / "dated",
    )
    workspace = Workspace.build(APP, tmp_path / "ws")
    history_end = _dates(workspace)[-1]
    armed = datetime.now(UTC)
    setup = ScenarioSetup(
        scenario_id="two-deploys", directory=tmp_path, stack_dir=tmp_path,
        delivery_mode="multi-commit", load_profile="search-storm", load_rate="0",
        inject_patches=series,
    )  # fmt: skip
    delivery = deliver_at_arm(setup, workspace)
    assert delivery.fault_commit == workspace.head()
    assert delivery.restart
    older, recent = _dates(workspace)[-2:]
    assert recent - older == timedelta(days=5, hours=6)
    assert abs(recent - armed) < timedelta(minutes=1)
    assert history_end < older
    assert workspace.git("log", "-2", "--format=%s").splitlines() == [
        "Require two characters for a query",
        "Cap the page size at 200",
    ]
    committed = [
        datetime.fromisoformat(d) for d in workspace.git("log", "-2", "--format=%cI").split()
    ]
    assert committed == [recent, older]
    tree = workspace.path / "bookshelf"
    assert "MAX_PAGE_SIZE = 200" in (tree / "config.py").read_text()
    assert "MIN_QUERY_LENGTH = 2" in (tree / "validation.py").read_text()


@pytest.mark.parametrize(
    "dates",
    [
        ["Tue, 1 Dec 2026 15:12:40 +0100", "Thu, 26 Nov 2026 09:12:40 +0100"],
        ["Tue, 1 Dec 2026 15:12:40 +0100", "Sat, 1 Dec 2029 15:12:40 +0100"],
    ],
    ids=["decreasing", "reaching-past-the-history"],
)
def test_multi_commit_series_out_of_order_falls_back_to_minutes_apart(
    tmp_path: Path, change_series: list[Path], dates: list[str]
) -> None:
    """A series dated backwards, or spread so wide the older commit would predate HEAD,
    lands minutes apart ending now: the history never reads out of order."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    workspace.deliver_series(_redated(change_series, dates, tmp_path / "dated"))
    dates_seen = _dates(workspace)
    assert dates_seen == sorted(dates_seen)
    assert dates_seen[-1] - dates_seen[-2] == timedelta(minutes=9)


def test_a_patch_that_does_not_apply_is_a_clear_error(tmp_path: Path) -> None:
    """A broken patch names the patch and leaves the repo clean, not mid-am."""
    broken = tmp_path / "0001-broken.patch"
    broken.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Daniel Brandt <dbrandt@shelfwise.io>\nDate: Mon, 2 Nov 2026 10:00:00 +0100\n"
        "Subject: [PATCH] Touch a file that is not there\n\n---\n"
        "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    workspace = Workspace.build(APP, tmp_path / "ws")
    head = workspace.head()
    with pytest.raises(WorkspaceError, match="git am"):
        workspace.deliver_recent([broken])
    assert workspace.head() == head
    assert not (workspace.path / ".git" / "rebase-apply").exists()


def test_a_delivery_cut_short_is_aborted_and_repeated(tmp_path: Path, change_patch: Path) -> None:
    """A deployer killed inside `git am` leaves `.git/rebase-apply` and the locks its git
    held (index, HEAD, the branch ref); the repeated arming removes them, aborts the am and
    delivers from the original HEAD."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    head = workspace.head()
    stuck = tmp_path / "0001-stuck.patch"
    stuck.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Daniel Brandt <dbrandt@shelfwise.io>\nDate: Mon, 2 Nov 2026 10:00:00 +0100\n"
        "Subject: [PATCH] Touch a file that is not there\n\n---\n"
        "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    who = ["-c", "user.name=Daniel Brandt", "-c", "user.email=dbrandt@shelfwise.io"]
    cut = subprocess.run(
        ["git", *who, "am", str(stuck)], cwd=workspace.path, capture_output=True, check=False
    )
    assert cut.returncode != 0
    assert (workspace.path / ".git" / "rebase-apply").exists(), "the am did not stop mid-way"
    # its git was killed holding the index, or while moving HEAD and the branch
    for held in ("index.lock", "HEAD.lock", "refs/heads/main.lock"):
        (workspace.path / ".git" / held).touch()
    (commit,) = workspace.deliver_recent([change_patch])
    assert workspace.git("rev-parse", "HEAD~1") == head
    assert workspace.head() == commit
    assert not (workspace.path / ".git" / "rebase-apply").exists()


@pytest.mark.parametrize("mode", ["setup-baked", "arm-deploy-recent"])
def test_agent_clone_has_no_trace_of_the_harness(tmp_path: Path, mode: str) -> None:
    """Whole history, tree, file names and identities are free of harness words."""
    patches = sorted((STAMPEDE / "inject").glob("*.patch"))
    assert patches, f"the scenario ships its fault under {STAMPEDE / 'inject'}"
    baked = patches if mode == "setup-baked" else []
    workspace = Workspace.build(APP, tmp_path / "ws", baked_patches=baked)
    if mode == "arm-deploy-recent":
        workspace.deliver_recent(patches)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(workspace.path), str(clone)], check=True)
    surfaces = {
        "history": workspace.git("log", "-p", "--all", "--format=%an %ae %cn %ce %s%n%b"),
        "files": workspace.git("ls-files"),
        "refs": workspace.git("for-each-ref", "--format=%(refname)"),
        "git dir": "\n".join(str(p.relative_to(workspace.path)) for p in workspace.path.rglob("*")),
    }
    for surface, text in surfaces.items():
        hits = sorted({match.group(0) for match in TELLS.finditer(text)})
        assert not hits, f"harness words in the {surface}: {hits}"
    assert not (workspace.path / ".git" / "logs").exists(), "no reflog keeps arm-time messages"


def test_clearing_locks_removes_git_files_only(tmp_path: Path) -> None:
    """A lock file goes; a folder the agent named `*.lock` stays and does not stop the
    clearing (it raised before); a `.git` that is a link is refused, not followed."""
    workspace = Workspace.build(APP, tmp_path / "ws")
    git_dir = workspace.path / ".git"
    (git_dir / "HEAD.lock").touch()
    planted = git_dir / "planted.lock"
    planted.mkdir()
    workspace.clear_locks()
    assert not (git_dir / "HEAD.lock").exists()
    assert planted.is_dir()
    elsewhere = tmp_path / "elsewhere"
    git_dir.rename(elsewhere)
    git_dir.symlink_to(elsewhere)
    with pytest.raises(WorkspaceError, match="not a folder of the run's own"):
        workspace.clear_locks()
