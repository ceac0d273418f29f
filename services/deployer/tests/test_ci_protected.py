"""The CI gate's protected tests: each cheat on the hand-off tests is played and must be red.

Real git and real pytest on a small fixture repo (`fixtures/shop/`): the code is broken
in each cheat, and the cheat hides the breakage from the tests as submitted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from sreforge_contracts import CiResult
from sreforge_deployer import WorkspaceError
from sreforge_deployer._handlers import ci_result
from sreforge_deployer.gate import ChangedTests, CiCheckout, CiProtection, CiRun, SetOutcome
from sreforge_deployer.gate._test_sets import JunitReport, SetName, read_junit
from sreforge_git import git_env

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(90)

SHOP = FIXTURES / "shop"
HIDDEN = FIXTURES / "shop-hidden"
PRICING = "shop/pricing.py"
BROKEN_TOTAL = (SHOP / PRICING).read_text().replace("sum(prices) *", "(sum(prices) + 1) *")
HELLO = (SHOP / PRICING).read_text()
HI = HELLO.replace('f"Hello, {name}"', 'f"Hi, {name}"')


def _git(repo: Path, *args: str, raw: bool = False) -> str:
    env = {**git_env(), "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.org"}
    env |= {"GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.org"}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout if raw else done.stdout.strip()


@pytest.fixture
def shop(tmp_path: Path) -> tuple[Path, str]:
    """The shop repo as the hand-off commit: its code, tests and pytest.ini."""
    path = tmp_path / "workspace"
    shutil.copytree(SHOP, path)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Shop")
    return path, _git(path, "rev-parse", "HEAD")


def _submission(repo: Path, edits: dict[str, str | None]) -> str:
    """The diff an agent would submit: write (or delete, None) files; the repo is restored."""
    for name, text in edits.items():
        target = repo / name
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "--binary", "HEAD", raw=True)
    _git(repo, "reset", "-q", "--hard")
    _git(repo, "clean", "-q", "-fdx")
    return diff


def _stand_in_judge(
    name: SetName, submitted: Path, folder: Path, place: Path
) -> tuple[int | None, str, JunitReport | None]:
    """A test double of the judge for the shop, which has no stack to serve: the hidden
    folder's tests run in a copy of the submitted tree (the real judge: `test_judge.py`)."""
    tree = place / "tree"
    shutil.copytree(submitted, tree)
    shutil.copytree(folder, tree / name)
    report = place / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name]
    done = subprocess.run(
        [*argv, f"--junitxml={report}"], cwd=tree, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout, read_junit(report)


def _gate(
    shop: tuple[Path, str], edits: dict[str, str | None], protection: CiProtection | None = None
) -> CiRun:
    path, base = shop
    with CiCheckout(path, base) as checkout:
        diff = _submission(path, edits)
        return checkout.run(diff, sys.executable, 60, 20_000, protection, _stand_in_judge)


def _set(run: CiRun, name: str) -> SetOutcome:
    found = [ran for ran in run.test_sets if ran.name == name]
    assert found, f"no {name} set in {[ran.name for ran in run.test_sets]}:\n{run.output}"
    return found[0]


def _red_by_handoff(run: CiRun) -> SetOutcome:
    """The cheat fooled the submitted tests, and the hand-off set caught it."""
    assert _set(run, "submitted").green, run.output
    handoff = _set(run, "handoff")
    assert not handoff.green, run.output
    assert not run.green
    return handoff


def test_a_fix_passes_every_set_and_the_record_lists_them_with_counts(
    shop: tuple[Path, str],
) -> None:
    """A legitimate change with its own new test is green in all three sets."""
    extra = "from shop.pricing import total\n\n\ndef test_whole_discount():\n"
    extra += "    assert total([3.0], 1.0) == 0\n"
    run = _gate(shop, {"tests/test_new.py": extra}, CiProtection(hidden_dir=HIDDEN))
    assert run.green, run.output
    assert [ran.name for ran in run.test_sets] == ["submitted", "handoff", "hidden"]
    counts = {ran.name: (ran.passed, ran.failed, ran.skipped, ran.errors) for ran in run.test_sets}
    assert counts == {"submitted": (5, 0, 0, 0), "handoff": (4, 0, 0, 0), "hidden": (1, 0, 0, 0)}
    event = ci_result("run-1", run)
    assert isinstance(event, CiResult)
    record = CiResult.model_validate_json(event.model_dump_json()).outcome()
    assert record.test_sets is not None
    assert [(ran.name, ran.green, ran.passed) for ran in record.test_sets] == [
        ("submitted", True, 5),
        ("handoff", True, 4),
        ("hidden", True, 1),
    ]
    for name in ("submitted", "handoff", "hidden"):
        assert f"CI test set {name}" in run.output


def test_deleting_a_hand_off_test_file_does_not_hide_the_breakage(
    shop: tuple[Path, str],
) -> None:
    """The hand-off set restores the deleted file, and its tests fail on the broken code."""
    run = _gate(shop, {PRICING: BROKEN_TOTAL, "tests/test_pricing.py": None})
    handoff = _red_by_handoff(run)
    assert handoff.exit_code == 1
    assert handoff.failed == 2
    assert "test_total" in run.output


def test_a_conftest_that_rewrites_outcomes_is_dropped(shop: tuple[Path, str]) -> None:
    """An added conftest forcing every report to pass is removed in the hand-off set."""
    forcing = (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    report = outcome.get_result()\n"
        "    report.outcome = 'passed'\n    report.longrepr = None\n"
    )
    run = _gate(shop, {PRICING: BROKEN_TOTAL, "conftest.py": forcing})
    handoff = _red_by_handoff(run)
    assert handoff.failed == 2


def test_skipping_a_failing_hand_off_test_is_red(shop: tuple[Path, str]) -> None:
    """A `skip` marker added to the failing tests does not survive the restore."""
    skipped = (
        (SHOP / "tests/test_pricing.py")
        .read_text()
        .replace("def test_", "@pytest.mark.skip(reason='flaky')\ndef test_")
    )
    run = _gate(shop, {PRICING: BROKEN_TOTAL, "tests/test_pricing.py": "import pytest\n" + skipped})
    assert _set(run, "submitted").skipped == 2
    assert _red_by_handoff(run).failed == 2


def test_app_code_that_skips_the_tests_it_is_imported_by_is_red(shop: tuple[Path, str]) -> None:
    """Tests that ran at the hand-off commit may not be skipped, whatever skips them."""
    skipping = BROKEN_TOTAL.replace(
        '    """The basket\'s total after `discount` (a fraction), to the cent."""\n',
        "    import sys\n\n    if 'pytest' in sys.modules:\n"
        "        sys.modules['pytest'].skip('not today')\n",
    )
    assert skipping != BROKEN_TOTAL
    run = _gate(shop, {PRICING: skipping})
    handoff = _red_by_handoff(run)
    assert handoff.exit_code == 0, "pytest itself calls an all-skipped run green"
    assert "skipped or xfailed (it ran at the hand-off commit)" in run.output
    assert "tests.test_pricing::test_total: skipped or xfailed" in run.output


def test_a_pytest_ini_that_collects_nothing_is_red(shop: tuple[Path, str]) -> None:
    """No tests collected (pytest exit 5) is red, never an empty green."""
    ini = (SHOP / "pytest.ini").read_text() + "python_files = nothing_*.py\n"
    run = _gate(shop, {"pytest.ini": ini})
    assert not run.green
    assert run.exit_code == 5
    assert "no tests ran" in run.output


def test_a_pytest_ini_that_collects_a_subset_is_restored(shop: tuple[Path, str]) -> None:
    """Narrowing collection to the passing files is undone by the base's pytest.ini."""
    ini = (SHOP / "pytest.ini").read_text() + "python_files = test_receipt.py\n"
    run = _gate(shop, {PRICING: BROKEN_TOTAL, "pytest.ini": ini})
    assert _set(run, "submitted").passed == 2
    assert _red_by_handoff(run).failed == 2


def test_a_module_standing_in_for_pytest_is_red(shop: tuple[Path, str]) -> None:
    """A root `pytest.py` that writes a green JUnit report itself is refused."""
    fake = (
        "import sys\n\npath = next(a for a in sys.argv if a.startswith('--junitxml='))[11:]\n"
        "cases = ''.join(f'<testcase classname=\"tests.test_pricing\" name=\"{n}\"/>'"
        " for n in ('test_total', 'test_discount'))\n"
        "open(path, 'w').write(f'<testsuites><testsuite>{cases}</testsuite></testsuites>')\n"
        "print('2 passed')\n"
    )
    run = _gate(shop, {PRICING: BROKEN_TOTAL, "pytest.py": fake})
    handoff = _red_by_handoff(run)
    assert handoff.exit_code is None, "the hand-off set does not run in a tree it cannot trust"
    assert "pytest.py: a top-level module that stands in for the test runner" in run.output


def test_the_hidden_tests_catch_what_the_hand_off_tests_do_not(shop: tuple[Path, str]) -> None:
    """Breaking a case no hand-off test covers is red in the hidden set."""
    empty_broken = HELLO.replace(
        "return round(", "if not prices:\n        return -1.0\n    return round("
    )
    run = _gate(shop, {PRICING: empty_broken}, CiProtection(hidden_dir=HIDDEN))
    assert [(ran.name, ran.green) for ran in run.test_sets] == [
        ("submitted", True),
        ("handoff", True),
        ("hidden", False),
    ]
    assert _set(run, "hidden").failed == 1
    assert "test_an_empty_basket_costs_nothing" in run.output
    assert not run.green


def test_a_listed_changed_test_may_be_changed_by_the_fix(shop: tuple[Path, str]) -> None:
    """A test the scenario lists may change with the fix; unlisted ones may not."""
    receipt = (SHOP / "tests/test_receipt.py").read_text().replace("Hello, Ada", "Hi, Ada")
    edits: dict[str, str | None] = {PRICING: HI, "tests/test_receipt.py": receipt}
    unlisted = _gate(shop, edits)
    assert _red_by_handoff(unlisted).failed == 1
    by_id = CiProtection(
        changed=ChangedTests.from_entries(["tests/test_receipt.py::test_greeting"])
    )
    listed = _gate(shop, edits, by_id)
    assert listed.green, listed.output
    assert _set(listed, "handoff").passed == 3, "the listed test is not run from the base"
    by_file = CiProtection(changed=ChangedTests.from_entries(["tests/test_receipt.py"]))
    kept = _gate(shop, edits, by_file)
    assert kept.green, kept.output
    assert _set(kept, "handoff").passed == 4, "the submitted version of the file ran"


def test_a_base_without_tests_runs_no_hand_off_set(tmp_path: Path) -> None:
    """Nothing to protect: the submitted set decides alone, and the record says so."""
    path = tmp_path / "workspace"
    path.mkdir()
    (path / "app.py").write_text("VALUE = 1\n")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "App")
    run = _gate(
        (path, _git(path, "rev-parse", "HEAD")), {"test_app.py": "def test_ok():\n    pass\n"}
    )
    assert run.green, run.output
    assert [ran.name for ran in run.test_sets] == ["submitted"]


def test_a_rewritten_object_in_the_workspace_store_cannot_change_the_hand_off_tests(
    shop: tuple[Path, str],
) -> None:
    """The agent owns `.git/objects`: a hand-off test rewritten there is refused, not run."""
    path, base = shop
    blob = _git(path, "rev-parse", f"{base}:tests/test_pricing.py")
    loose = path / ".git" / "objects" / blob[:2] / blob[2:]
    content = b"def test_total():\n    pass\n"
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(content) + content))
    with CiCheckout(path, base) as checkout, pytest.raises(WorkspaceError, match="clone"):
        checkout.run("", sys.executable, 60, 20_000)


def test_a_kept_changed_test_file_may_not_bring_pytest_hooks(shop: tuple[Path, str]) -> None:
    """A file kept as submitted that loads a plugin or defines a hook is refused."""
    receipt = (SHOP / "tests/test_receipt.py").read_text().replace("Hello, Ada", "Hi, Ada")
    hooked = receipt + "\n\npytest_plugins = ['shop.plugin']\n"
    kept = CiProtection(changed=ChangedTests.from_entries(["tests/test_receipt.py"]))
    run = _gate(shop, {PRICING: HI, "tests/test_receipt.py": hooked, "shop/plugin.py": ""}, kept)
    handoff = _red_by_handoff(run)
    assert handoff.exit_code is None
    assert "tests/test_receipt.py: defines pytest_plugins" in run.output
