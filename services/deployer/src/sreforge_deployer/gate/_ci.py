"""The CI gate and the auto-merge: a clean checkout of the submission, its tests, the merge.

The tests are agent-controlled code (a `conftest.py` is enough): they run inside
the jail of `_confine.ci_jail` (the checkout, the interpreter, /usr; no network, no
harness tree, no scenario, no run dir, own PID namespace), or not at all.

Blocking (git and pytest subprocesses): the adapter calls these through
`asyncio.to_thread`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sreforge_confine import Confinement
from sreforge_contracts import SUBMISSION_DIR
from sreforge_git import GitError, GitResult, run_git

from sreforge_deployer._confine import JAIL_HOME, ci_jail, confine, confinement_for
from sreforge_deployer._errors import WorkspaceError
from sreforge_deployer._history import Author
from sreforge_deployer._process import run_captured
from sreforge_deployer._workspace import NO_REFLOG, Workspace, identity_env
from sreforge_deployer.gate._base_reports import BaseReports
from sreforge_deployer.gate._gate import CiProtection, KnownBase, SetOutcome, run_test_sets
from sreforge_deployer.gate._judge import Judge
from sreforge_deployer.gate._test_sets import GRADED_SETS
from sreforge_deployer.gate._test_trees import copy_tree

__all__ = [
    "CI_NICENESS",
    "MERGE_AUTHOR",
    "MERGE_MESSAGE",
    "CiCheckout",
    "CiRun",
    "ci_clones",
    "merge_and_checkout",
    "remove_ci_clones",
]

CI_NICENESS = 10
"""How much the CI gate's tests yield the CPU to the stacks being measured."""

MERGE_AUTHOR = Author("Merge Queue", "merge-queue@localhost")
MERGE_MESSAGE = "Merge change into main"
# Never left behind in the agent's view of the repo (the runner's sentinel lives there).
_KEEP_ON_CLEAN = SUBMISSION_DIR
_TEST_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
# The agent also wrote its workspace's .git: when the merge runs git there, on the host,
# none of its hooks, fsmonitor or filter programs may run (nor any in the checkout).
_RUN_REPO_CONFIG = {**NO_REFLOG, "core.hooksPath": "/dev/null", "core.fsmonitor": "false"}
_HARNESS_GIT_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    "\tlogallrefupdates = false\n"
)
_DEFAULT_BWRAP = "bwrap"
_MAX_SETS = 5


@dataclass(frozen=True)
class CiRun:
    """What the gate found: exit code (None when it timed out or never ran), output, time."""

    green: bool
    output: str
    exit_code: int | None
    duration_ms: float
    tree: str | None = None
    """The submitted tree's id in the checkout (set when the patch applied)."""
    test_sets: tuple[SetOutcome, ...] = ()
    """The test sets that ran, in order (none when the diff did not apply)."""


def _clone_prefix(run_id: str) -> str:
    return f"ci-{run_id}-" if run_id else "ci-"


def ci_clones(run_id: str, temp_dir: Path | None = None) -> list[Path]:
    """The CI clones of run `run_id` in the temp dir (`ci-<run_id>-*`)."""
    if not run_id:
        return []
    where = temp_dir or Path(tempfile.gettempdir())
    return sorted(path for path in where.glob(f"{_clone_prefix(run_id)}*") if path.is_dir())


def remove_ci_clones(run_id: str, temp_dir: Path | None = None) -> list[Path]:
    """Remove the run's CI clones (one a deployer killed mid-CI left); those removed."""
    found = ci_clones(run_id, temp_dir)
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return found


class CiCheckout:
    """A throwaway clone of the run workspace at the base commit, with the submission applied.

    Use as a context manager: the temp dir is removed on exit.
    """

    def __init__(
        self,
        workspace: Path,
        base_commit: str,
        confinement: Confinement | None = None,
        *,
        run_id: str = "",
    ) -> None:
        self.workspace = workspace
        self.base_commit = base_commit
        self.confinement = confinement
        self._root = Path(tempfile.mkdtemp(prefix=_clone_prefix(run_id)))
        self.path = self._root / "repo"
        self.base_tree = self._root / "base"
        """The base commit's files, untouched by any test run (the hand-off tests' source)."""

    def __enter__(self) -> CiCheckout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the checkout."""
        shutil.rmtree(self._root, ignore_errors=True)

    def prepare(self, diff: str) -> tuple[str | None, str | None]:
        """Clone at the base and apply `diff`: (tree id, None), or (None, git's complaint)."""
        self._clone()
        copy_tree(self.path, self.base_tree)
        complaint = self._apply(diff)
        if complaint is not None:
            return None, complaint
        return self._git("write-tree").stdout.strip(), None

    def run(
        self,
        diff: str,
        python: str,
        timeout_s: float,
        max_chars: int,
        protection: CiProtection | None = None,
        judge: Judge | None = None,
        base_reports: BaseReports | None = None,
    ) -> CiRun:
        """Check out the base, apply `diff`, run the test sets; never raises for a red run.

        `timeout_s` bounds each set; `max_chars` the output, shared between the sets;
        `judge` runs the scenario's hidden and graded sets; `base_reports` keeps the
        base's learned report per base tree (read instead of learning it again).
        """
        started = time.monotonic()
        tree, complaint = self.prepare(diff)
        if tree is None:
            return CiRun(False, complaint or "", None, _ms_since(started))

        def runner(cwd: Path, extra: Sequence[str]) -> tuple[int | None, str]:
            return _run_tests(cwd, python, timeout_s, extra, confinement=self.confinement)

        work = self._root / "gate"
        work.mkdir()
        known = None
        if base_reports is not None:
            base = self._git("rev-parse", f"{self.base_commit}^{{tree}}").stdout.strip()
            jail = "none" if self.confinement is None else self.confinement.name
            known = KnownBase(base_reports, BaseReports.key_for(base, python, jail))
        sets = run_test_sets(
            self.path, self.base_tree, work, runner, protection or CiProtection(), judge, known
        )
        own = [ran for ran in sets if ran.name not in GRADED_SETS]
        green = all(ran.green for ran in own)
        deciding = next((ran for ran in own if not ran.green), own[-1])
        output = _gate_output(sets, max_chars)
        return CiRun(green, output, deciding.exit_code, _ms_since(started), tree, tuple(sets))

    def _clone(self) -> None:
        src = str(self.workspace)
        # Not --shared or a local clone: those read the agent's object store as is, so a
        # rewritten object would change the hand-off tests. Over the transport every object
        # is hashed on arrival, and one that is not what its id says is refused.
        args = ["clone", "-q", "--no-checkout", "--no-local", src, str(self.path)]
        _checked(_git_run(self._root, args), "clone of the run workspace")
        _checked(self._git("checkout", "-q", "--detach", self.base_commit), "checkout of base")

    def _apply(self, diff: str) -> str | None:
        """Apply the diff to the index and tree; git's message when it does not apply."""
        if not diff.strip():
            return None
        patch = self._root / "submission.patch"
        patch.write_text(diff if diff.endswith("\n") else diff + "\n")
        result = self._git("apply", "--binary", "--index", str(patch))
        if result.returncode != 0:
            return f"the submitted diff does not apply to {self.base_commit[:12]}:\n{result.stderr}"
        return None

    def _git(self, *args: str) -> GitResult:
        return _git_run(self.path, list(args))


def merge_and_checkout(checkout: CiCheckout, tree: str) -> str:
    """Commit `tree` onto the workspace's main and make the workspace exactly that commit.

    The commit's parent is main as the agent left it, so its own commits stay in the
    history; the tree is the one CI tested. Untracked files are removed (the runner's
    `.oncall/` excepted). Returns the merged commit id.
    """
    workspace = Workspace(checkout.workspace)
    _disarm(workspace.path)
    workspace.clear_locks()  # a merge cut short by a killed deployer is repeated
    parent = _main_head(workspace) or checkout.base_commit
    stamp = identity_env(MERGE_AUTHOR, _now_iso())
    made = _git_run(checkout.path, ["commit-tree", tree, "-p", parent, "-m", MERGE_MESSAGE], stamp)
    commit = _checked(made, "commit of the merged tree").stdout.strip()
    for args, what in (
        (["fetch", "-q", "--no-tags", str(checkout.path), commit], "fetch of the merge"),
        (["checkout", "-q", "-f", "-B", "main", commit], "checkout of the merge"),
        (["clean", "-q", "-ffdx", "-e", _KEEP_ON_CLEAN], "clean of the workspace"),
    ):
        _checked(_git_run(workspace.path, args), what)
    if workspace.head() != commit:
        raise WorkspaceError(f"workspace {workspace.path} is not at the merged commit {commit}")
    return commit


def truncate(text: str, max_chars: int) -> str:
    """`text`, or its head and tail around a marker saying how much was cut."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"


def _main_head(workspace: Workspace) -> str | None:
    found = _git_run(workspace.path, ["rev-parse", "--verify", "-q", "refs/heads/main"])
    if found.returncode != 0:
        return None
    return found.stdout.strip() or None


def _gate_output(sets: Sequence[SetOutcome], max_chars: int) -> str:
    """Each set's banner and its output, the output cut to a share of `max_chars`."""
    share = max(max_chars // _MAX_SETS, 200)
    return "\n".join(f"{ran.header()}\n{truncate(ran.output, share)}" for ran in sets)


def _disarm(path: Path) -> None:
    """Give the workspace's git dir the harness's own config back before git runs there:
    the agent's local config (filters, include.path, fsmonitor), info/attributes and
    commondir are dropped; a `.git` that is not a plain folder is refused."""
    git_dir = Workspace(path).own_git_dir()
    try:
        for name in ("config", "commondir"):
            (git_dir / name).unlink(missing_ok=True)  # a link is removed, never followed
        (git_dir / "config").write_text(_HARNESS_GIT_CONFIG)
        info = git_dir / "info"
        if info.is_symlink():
            info.unlink()
        elif info.is_dir():
            (info / "attributes").unlink(missing_ok=True)
    except OSError as error:
        raise WorkspaceError(f"workspace {path}: cannot reset its git config: {error}") from error


def _run_tests(
    cwd: Path,
    python: str,
    timeout_s: float,
    extra_args: Sequence[str] = (),
    *,
    confinement: Confinement | None = None,
) -> tuple[int | None, str]:
    """Run pytest (plus `extra_args`) on the checkout `cwd` inside the CI jail: its exit
    code (None on timeout) and output. `ConfinementFailed` when no jail can be made."""
    env = {key: os.environ[key] for key in _TEST_ENV if key in os.environ}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=JAIL_HOME, TMPDIR=JAIL_HOME)
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra_args]
    jail = ci_jail(cwd.resolve(), python, argv)
    confined = confine(confinement or confinement_for(_DEFAULT_BWRAP), jail)
    code, output = run_captured(_lowered(confined.argv), cwd, env, timeout_s)
    if code is None:
        return None, f"{output}\n[the tests did not finish within {timeout_s:g} s]"
    return code, output


def _lowered(argv: Sequence[str]) -> list[str]:
    """`argv` at CI_NICENESS when `nice` exists: on a shared machine another run's stack is
    being graded while this one's tests run, and the load generator and Prometheus must not
    starve behind them (a starved load generator reads as "the load died")."""
    nice = shutil.which("nice", path="/usr/bin:/bin")
    return [nice, "-n", str(CI_NICENESS), *argv] if nice else list(argv)


def _git_run(cwd: Path, args: list[str], extra: dict[str, str] | None = None) -> GitResult:
    try:
        return run_git(cwd, *args, env=extra, config=_RUN_REPO_CONFIG)
    except GitError as error:
        raise WorkspaceError(f"CI: {error}") from error


def _checked(result: GitResult, what: str) -> GitResult:
    if result.returncode != 0:
        raise WorkspaceError(f"CI: {what} failed (exit {result.returncode}):\n{result.stderr}")
    return result


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _now_iso() -> str:
    return datetime.now(UTC).astimezone().isoformat()
