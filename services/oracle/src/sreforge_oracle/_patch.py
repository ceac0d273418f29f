"""The patch oracle, pure: a green CiResult's graded test sets in → Scored out.

A patch scenario (SPEC §4, seed 000 "patch profile") is graded SWE-bench style from
the CI gate's two hidden sets: `fail_to_pass` (fail on the base commit, must pass
once fixed) and `pass_to_pass` (must keep passing). Each signal is satisfied only when
its set ran, is green and every one of its tests passed; the run passes only when
`ci_green`, `fail_to_pass` and `pass_to_pass` all are. The score is the weighted sum
of the satisfied signals (the manifest's weights); a signal's `value` is the share of
its set's tests that passed, and its detail names the tests that did not. CI red and
no submission never reach here: the fail-closed path scores them.
"""

from __future__ import annotations

from collections.abc import Mapping

from sreforge_contracts import CiResult, CiTestSet, OracleScore, OracleSignal, Scored

__all__ = ["GRADED_SIGNALS", "PATCH_ORACLE", "patch_not_submitted", "patch_scored"]

PATCH_ORACLE = "patch"
GRADED_SIGNALS = ("fail_to_pass", "pass_to_pass")
_DEFAULT_WEIGHTS = {"ci_green": 0.2, "fail_to_pass": 0.5, "pass_to_pass": 0.3}
_PRODUCER = "oracle"
_MAX_NAMED = 10


def patch_scored(event: CiResult, weights: Mapping[str, float] | None = None) -> Scored:
    """The Scored of a patch run from its CiResult (green or red: red is `rejected`)."""
    weight = dict(weights or _DEFAULT_WEIGHTS)
    sets: dict[str, CiTestSet] = {ran.name: ran for ran in event.test_sets or []}
    signals = [
        OracleSignal(
            id="ci_green",
            satisfied=event.green,
            value=1.0 if event.green else 0.0,
            weight=weight.get("ci_green", 0.0),
            detail="the submission's own and the hand-off tests passed"
            if event.green
            else "CI red",
        )
    ]
    signals += [_set_signal(name, sets.get(name), weight.get(name, 0.0)) for name in GRADED_SIGNALS]
    passed = event.green and all(signal.satisfied for signal in signals)
    score = sum(signal.weight for signal in signals if signal.satisfied) if event.green else 0.0
    verdict = "passed" if passed else ("failed" if event.green else "rejected")
    return Scored(
        run_id=event.run_id,
        producer=_PRODUCER,
        score=OracleScore(
            oracle_id=PATCH_ORACLE, score=min(round(score, 6), 1.0), passed=passed, signals=signals
        ),
        verdict=verdict,
    )


def _set_signal(name: str, ran: CiTestSet | None, weight: float) -> OracleSignal:
    if ran is None:
        return OracleSignal(
            id=name, satisfied=False, value=0.0, weight=weight, detail=f"{name}: not run"
        )
    passed, failed = ran.passed_tests or [], ran.failed_tests or []
    total = len(passed) + len(failed)
    satisfied = ran.green and total > 0 and not failed
    value = len(passed) / total if total else 0.0
    detail = f"{len(passed)}/{total} passed"
    if failed:
        named = ", ".join(failed[:_MAX_NAMED]) + (" ..." if len(failed) > _MAX_NAMED else "")
        detail += f"; not passed: {named}"
    elif not ran.green:
        detail += f"; set red (exit {ran.exit_code})"
    return OracleSignal(id=name, satisfied=satisfied, value=value, weight=weight, detail=detail)


def patch_not_submitted(
    run_id: str, reason: str = "", weights: Mapping[str, float] | None = None
) -> Scored:
    """No submission: failed, score 0, every signal unsatisfied (`no_submission`)."""
    weight = dict(weights or _DEFAULT_WEIGHTS)
    detail = f"no_submission{': ' + reason if reason else ''}"
    signals = [
        OracleSignal(
            id=name, satisfied=False, value=0.0, weight=weight.get(name, 0.0), detail=detail
        )
        for name in ("ci_green", *GRADED_SIGNALS)
    ]
    score = OracleScore(oracle_id=PATCH_ORACLE, score=0.0, passed=False, signals=signals)
    return Scored(run_id=run_id, producer=_PRODUCER, score=score, verdict="failed")
