"""A patch run's topology: the workspace at the pinned base commit, nothing running;
and the CI gate's graded sets, judged and reported test by test without deciding CI's
green (the real judge: `test_judge.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from sreforge_contracts import RunRequested
from sreforge_deployer import DeployerSettings, WorkspaceError
from sreforge_deployer._patch import MARKER, PatchTopology, is_patch_run, is_patch_scenario
from sreforge_deployer.gate import CiProtection
from sreforge_deployer.gate._gate import run_test_sets
from sreforge_deployer.gate._test_sets import JunitReport, Outcome, SetName

SCENARIO = "patch-stale-sort-keys"
BASE = "2c7df047187e1600faccc121ef7924107966e9be"


def _request(run_id: str) -> RunRequested:
    return RunRequested(
        run_id=run_id,
        producer="correlator",
        scenario=SCENARIO,
        agent="noop",
        time_scale=0.1,
        alert_route="0f3a9c2e7b1d4a6f8e0c2b4d6f8a1c3e",
    )


def test_the_patch_topology_checks_the_workspace_out_at_its_base_commit(
    settings: DeployerSettings,
) -> None:
    """up() builds only the workspace, at base_commit; arm() hands that commit over;
    the CI target says there is no redeploy; down() leaves nothing."""
    assert is_patch_scenario(settings.use_cases, SCENARIO)
    topology = PatchTopology.open(_request("patch-topology-1"), settings)
    facts = topology.up()
    assert facts.agent_endpoints == {}
    assert facts.operator_endpoints == {}
    assert is_patch_run(facts.run_dir)
    assert (facts.run_dir / MARKER).is_file()
    armed = topology.arm()
    assert armed.base_commit == BASE
    assert armed.fault_commit is None
    target = topology.ci_target()
    assert target is not None
    assert not target.redeploys
    assert target.base_commit == BASE
    adopted = PatchTopology.adopt(facts.run_dir, settings)
    assert adopted.ci_target() == target
    assert topology.down() == []
    assert not facts.run_dir.exists()


def test_graded_sets_run_after_green_own_sets_and_list_each_test(tmp_path: Path) -> None:
    """Both graded sets go to the judge, in full, and keep each test's outcome by its id;
    CI's own sets run in the tree as before."""
    tree, base, work = tmp_path / "tree", tmp_path / "base", tmp_path / "work"
    for folder in (tree, base, work):
        folder.mkdir()
    f2p, p2p = tmp_path / "f2p", tmp_path / "p2p"
    for folder in (f2p, p2p):
        folder.mkdir()
        (folder / "test_x.py").write_text("")
    judged: list[tuple[str, Path]] = []

    def runner(cwd: Path, extra: Sequence[str]) -> tuple[int | None, str]:
        junit = next(arg.split("=", 1)[1] for arg in extra if arg.startswith("--junitxml="))
        assert [arg for arg in extra if not arg.startswith("--")] == []
        own = '<testcase classname="tests.test_own" name="t"/>'
        (cwd / junit).write_text(f"<testsuite>{own}</testsuite>")
        return 0, ""

    def judge(
        name: SetName, submitted: Path, folder: Path, place: Path
    ) -> tuple[int | None, str, JunitReport | None]:
        judged.append((name, folder))
        assert submitted == tree
        assert place.is_dir()
        assert not any(place.iterdir())
        cases: dict[str, Outcome] = {f"{name}.test_x::test_ok": "passed"}
        if name == "pass_to_pass":
            cases[f"{name}.test_x::test_bad"] = "failed"
        return (1 if name == "pass_to_pass" else 0), "", JunitReport(cases)

    protection = CiProtection(graded=(("fail_to_pass", f2p), ("pass_to_pass", p2p)))
    sets = run_test_sets(tree, base, work, runner, protection, judge)
    by_name = {ran.name: ran for ran in sets}
    assert judged == [("fail_to_pass", f2p), ("pass_to_pass", p2p)]
    assert by_name["submitted"].green
    assert by_name["fail_to_pass"].passed_tests == ("test_x::test_ok",)
    assert by_name["pass_to_pass"].failed_tests == ("test_x::test_bad",)
    assert not by_name["pass_to_pass"].green


def test_graded_sets_without_a_judge_are_refused(tmp_path: Path) -> None:
    """A patch scenario's sets are never run in the tree they grade: no judge, no gate."""
    protection = CiProtection(graded=(("fail_to_pass", tmp_path),))
    with pytest.raises(WorkspaceError, match="judge"):
        run_test_sets(tmp_path, tmp_path, tmp_path, lambda *_: (0, ""), protection)
