"""What judging a scenario's hidden tests costs the CI gate, beside the sets run in the tree.

For each bookshelf scenario with hidden tests (`verify/ci/`, or a patch scenario's
`pass_to_pass/`, green on its base), builds the app with the scenario's fault committed,
then times, side by side, `--repeat` times each: the app's own suite run in the tree
(pytest, unconfined; what a `submitted` or `handoff` set costs without its jail) and the
hidden set judged (its own pytest process, the stack's seed once, a fresh jailed service
per test). Prints the median of each and the judged cost per test.

    python bench/judged_sets.py [--repeat 3] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sreforge_contracts import load_scenario
from sreforge_deployer import DeployerSettings
from sreforge_deployer.gate import judge_of
from sreforge_deployer.gate._test_sets import SetName

BOOKSHELF = Path(__file__).resolve().parents[1] / "use-cases" / "bookshelf"
APP = BOOKSHELF / "stacks" / "bookshelf-flask" / "app"
_ID = ["-c", "user.name=Bench", "-c", "user.email=bench@example.org"]


def _faulted_tree(scenario: Path, dest: Path) -> Path:
    """The app's tree with the scenario's inject patches committed on top of it."""
    shutil.copytree(APP, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "Import"]):
        subprocess.run(["git", *_ID, *args], cwd=dest, check=True)
    for patch in sorted((scenario / "inject").glob("*.patch")):
        subprocess.run(["git", *_ID, "am", "-q", str(patch)], cwd=dest, check=True)
    return dest


def _hidden(scenario: Path) -> tuple[SetName, Path] | None:
    if load_scenario(scenario).manifest.profile == "patch":
        return "pass_to_pass", scenario / "verify" / "pass_to_pass"  # green on the base
    folder = scenario / "verify" / "ci"
    return ("hidden", folder) if folder.is_dir() else None


def measure(scenario: Path, repeat: int) -> tuple[float, float, int]:
    """(in-tree suite s, judged set s, judged tests), medians over `repeat` runs."""
    found = _hidden(scenario)
    assert found is not None, f"{scenario.name}: no hidden tests"
    name, folder = found
    judge = judge_of(DeployerSettings(use_cases=BOOKSHELF.parent), scenario.name)
    in_tree: list[float] = []
    judged: list[float] = []
    tests = 0
    with tempfile.TemporaryDirectory(prefix="bench-judged-") as root:
        tree = _faulted_tree(scenario, Path(root) / "tree")
        for i in range(repeat):
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=tree,
                capture_output=True,
                check=False,
            )
            in_tree.append(time.monotonic() - started)
            place = Path(root) / f"judged-{i}"
            place.mkdir()
            started = time.monotonic()
            code, output, report = judge(name, tree, folder, place)
            judged.append(time.monotonic() - started)
            if code != 0 or report is None:
                raise SystemExit(f"{scenario.name}: the judged set failed:\n{output[-2000:]}")
            tests = len(report.cases)
    return statistics.median(in_tree), statistics.median(judged), tests


def main() -> None:
    """Print the figures side by side, one scenario per line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    names = args.scenarios or sorted(
        path.name
        for path in (BOOKSHELF / "scenarios").iterdir()
        if (path / "scenario.toml").is_file() and _hidden(path) is not None
    )
    print(f"{'scenario':<26} {'own suite in tree':>18} {'hidden set judged':>18} "
          f"{'tests':>6} {'per test':>9}")  # fmt: skip
    for name in names:
        in_tree, judged, tests = measure(BOOKSHELF / "scenarios" / name, args.repeat)
        print(f"{name:<26} {in_tree:>16.1f} s {judged:>16.1f} s {tests:>6} "
              f"{judged / max(tests, 1):>7.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
