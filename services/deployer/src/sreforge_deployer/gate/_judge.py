"""The CI gate's judge: hidden tests in a process of their own, the submission served apart.

A scenario's own set (`hidden`, from `verify/ci/`, and a patch scenario's `fail_to_pass`
and `pass_to_pass`) decides a verdict, so none of its code may share a process with the
submission: code under test that shares
pytest's process can rewrite its reports (a wrapped `TestReport` turns every failure into a
pass, and the JUnit file agrees). The judge is a pytest process on the harness's own
interpreter whose cwd, rootdir and configuration are a folder outside the submitted tree;
it imports the hidden tests and `_judge_plugin`, nothing of the submission. Each test's
`service` fixture starts the submitted service the way a run does (seeded, in the
service's jail, on a loopback port; see `_judge_plugin`) and the test speaks HTTP to it.
The JUnit report is written where no jail reaches.

Blocking (a subprocess): the gate runs it from the adapter's worker thread.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sreforge_deployer._process import run_captured, stop_groups
from sreforge_deployer.gate._test_sets import JunitReport, SetName, read_junit
from sreforge_deployer.gate._test_trees import copy_tree

__all__ = ["SPEC_ENV", "Judge", "JudgeSpec", "judge_for"]

SPEC_ENV = "SREFORGE_JUDGE_SPEC"
"""The judge process's variable naming its `JudgeSpec` file."""
PLUGIN = "sreforge_deployer.gate._judge_plugin"

Judge = Callable[[SetName, Path, Path, Path], tuple[int | None, str, JunitReport | None]]
"""(set, submitted tree, hidden tests folder, empty work folder) → (pytest's exit code, or
None when it timed out; its output; its JUnit report)."""

# PYTHONPATH: the harness imports as the deployer does (compose.yaml's engine finds it so).
_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TZ")
_INI = "[pytest]\naddopts =\nconsider_namespace_packages = false\n"


class JudgeSpec(BaseModel):
    """What the judge process needs to serve the submission: where, and how the stack runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario_dir: Path
    run_dir: Path
    """Holds `workspace/` (the submitted tree), then `data/`, `logs/` and `net/`."""
    python: str
    """The service's interpreter (the stack's `{python}`)."""
    bwrap_path: str
    port_lock_dir: Path
    port_range_low: int
    port_range_high: int
    pgid_file: Path
    """Each started group's id, a line each: what the gate stops if the judge dies."""


def judge_for(
    scenario_dir: Path,
    *,
    python: str,
    bwrap_path: str,
    port_lock_dir: Path,
    port_range: tuple[int, int],
    timeout_s: float,
) -> Judge:
    """A `Judge` for `scenario_dir`'s hidden and graded sets (`timeout_s` bounds each)."""

    def judge(
        name: SetName, submitted: Path, folder: Path, work: Path
    ) -> tuple[int | None, str, JunitReport | None]:
        served, judged = work / "served", work / "judge"
        copy_tree(submitted, served / "workspace")
        judged.mkdir(parents=True)
        shutil.copytree(folder, judged / name, symlinks=False)
        (judged / "pytest.ini").write_text(_INI)
        spec = JudgeSpec(
            scenario_dir=scenario_dir.resolve(),
            run_dir=served.resolve(),
            python=python,
            bwrap_path=bwrap_path,
            port_lock_dir=port_lock_dir,
            port_range_low=port_range[0],
            port_range_high=port_range[1],
            pgid_file=(work / "pgids").resolve(),
        )
        spec_file = work / "judge.json"
        spec_file.write_text(spec.model_dump_json())
        report = judged / f".judge-junit-{secrets.token_hex(8)}.xml"
        code, output = _run(judged, name, spec_file, report, timeout_s)
        _stop_left(spec.pgid_file)
        return code, output, read_junit(report)

    return judge


def _run(
    judged: Path, name: str, spec_file: Path, report: Path, timeout_s: float
) -> tuple[int | None, str]:
    env = {key: os.environ[key] for key in _ENV if key in os.environ}
    env.update(
        {
            SPEC_ENV: str(spec_file.resolve()),
            "HOME": str(judged.resolve()),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONSAFEPATH": "1",
        }
    )
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,
        f"--rootdir={judged.resolve()}",
        "-c",
        str((judged / "pytest.ini").resolve()),
        f"--junitxml={report.resolve()}",
        name,
    ]
    code, output = run_captured(argv, judged, env, timeout_s)
    if code is None:
        return None, f"{output}\n[the hidden tests did not finish within {timeout_s:g} s]"
    return code, output


def _stop_left(pgid_file: Path) -> None:
    """Stop every service group the judge started and did not stop (it was killed)."""
    try:
        lines = pgid_file.read_text().split()
    except FileNotFoundError:
        return
    stop_groups([int(line) for line in lines if line.isdigit()], 5.0)
