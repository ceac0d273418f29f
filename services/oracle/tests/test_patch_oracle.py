"""The patch oracle: SWE-bench-style grading from the CI gate's graded test sets."""

from __future__ import annotations

from sreforge_contracts import CiResult, CiTestSet
from sreforge_oracle._patch import patch_not_submitted, patch_scored

RUN = "20261202-170000-patch1"


def _set(name: str, passed: list[str], failed: list[str]) -> CiTestSet:
    return CiTestSet(
        name=name,  # type: ignore[arg-type]
        green=not failed,
        exit_code=1 if failed else 0,
        passed=len(passed),
        failed=len(failed),
        passed_tests=passed,
        failed_tests=failed,
    )


def _ci(green: bool, f2p: CiTestSet | None, p2p: CiTestSet | None) -> CiResult:
    sets = [CiTestSet(name="submitted", green=green)]
    sets += [ran for ran in (f2p, p2p) if ran is not None]
    return CiResult(
        run_id=RUN, producer="deployer", green=green, output="", duration_ms=1, test_sets=sets
    )


def test_every_graded_test_passing_passes_with_full_score() -> None:
    """All fail-to-pass and pass-to-pass tests pass: verdict passed, score 1."""
    scored = patch_scored(
        _ci(True, _set("fail_to_pass", ["a", "b"], []), _set("pass_to_pass", ["c"], []))
    )
    assert scored.verdict == "passed"
    assert scored.score.score == 1.0
    assert scored.score.oracle_id == "patch"


def test_one_fail_to_pass_test_failing_fails_the_run_and_names_it() -> None:
    """A partial fix is failed, its share reported as the signal's value."""
    scored = patch_scored(
        _ci(True, _set("fail_to_pass", ["a"], ["b"]), _set("pass_to_pass", ["c"], []))
    )
    assert scored.verdict == "failed"
    signal = next(s for s in scored.score.signals if s.id == "fail_to_pass")
    assert not signal.satisfied
    assert signal.value == 0.5
    assert "b" in signal.detail
    assert scored.score.score < 1.0


def test_a_broken_pass_to_pass_test_fails_the_run() -> None:
    """A fix that breaks what worked fails, however many fail-to-pass tests it fixes."""
    scored = patch_scored(
        _ci(True, _set("fail_to_pass", ["a"], []), _set("pass_to_pass", [], ["c"]))
    )
    assert scored.verdict == "failed"


def test_a_graded_set_that_did_not_run_fails_closed() -> None:
    """Missing sets are never read as passing."""
    scored = patch_scored(_ci(True, None, None))
    assert scored.verdict == "failed"
    assert not any(s.satisfied for s in scored.score.signals if s.id != "ci_green")


def test_ci_red_is_rejected_with_score_zero() -> None:
    """CI red: rejected, whatever the graded sets (they do not run then)."""
    scored = patch_scored(_ci(False, None, None))
    assert scored.verdict == "rejected"
    assert scored.score.score == 0.0


def test_no_submission_fails_with_score_zero() -> None:
    """No submission: failed, every signal unsatisfied, with the patch signals' ids."""
    scored = patch_not_submitted(RUN, "agent exited")
    assert scored.verdict == "failed"
    assert scored.score.score == 0.0
    assert [s.id for s in scored.score.signals] == ["ci_green", "fail_to_pass", "pass_to_pass"]
