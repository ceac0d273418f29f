"""Whether a scenario is QUALIFIED: a pure function of its campaign's results and the guard.

Rules (docs/qualify.md), each of which alone disqualifies:
- an arm with fewer graded trials than planned (missing, `error` or `aborted`: no evidence;
  this includes the time-scale-1 noop and reference when they were not run);
- noop or a negative fixture that passed a trial (they must fail every one);
- the reference that did not pass every trial;
- an integrity cheat that passed, or that never submitted (its fix did not apply to this
  scenario's tree, so no gate was tested: list the scenarios it applies to in
  `cheats.toml`, or write a variant for this one);
- no negative fixture at all (nothing proves a plausible non-fix fails);
- `sreforge guard` not clean (a hit, or it could not run);
- a baseline agent whose median score is 0.8 or more (the scenario is saturated).
Without baselines the headroom is "not measured", which does not disqualify.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from sreforge.campaign._stats import COUNTED
from sreforge.campaign._store import Result
from sreforge.qualify._arms import Arm

__all__ = ["HEADROOM_LIMIT", "ArmEvidence", "Decision", "GuardOutcome", "decide"]

HEADROOM_LIMIT = 0.8
"""A baseline's median score must stay below this (SPEC §10)."""


@dataclass(frozen=True)
class GuardOutcome:
    """What `sreforge guard` said: `clean` (None: it could not run) and a line of detail."""

    clean: bool | None
    detail: str


@dataclass(frozen=True)
class ArmEvidence:
    """One row of the evidence table: an arm, its verdict counts, run ids and whether it held."""

    arm: Arm
    counts: dict[str, int]
    run_ids: tuple[str, ...]
    median_score: float | None
    held: bool
    why: str


@dataclass(frozen=True)
class Decision:
    """QUALIFIED (`qualified`) or not, the evidence rows, and every reason it failed."""

    qualified: bool
    rows: tuple[ArmEvidence, ...]
    guard: GuardOutcome
    reasons: tuple[str, ...]
    headroom_measured: bool


def _evidence(arm: Arm, scenario: str, results: list[Result]) -> ArmEvidence:
    mine = [r for r in results if r.agent == arm.agent and r.scenario == scenario]
    counts: dict[str, int] = {}
    for result in mine:
        counts[result.verdict] = counts.get(result.verdict, 0) + 1
    graded = [r for r in mine if r.verdict in COUNTED]
    scores = [r.score or 0.0 for r in graded]
    median = statistics.median(scores) if scores else None
    passed = sum(1 for r in graded if r.verdict == "passed")
    run_ids = tuple(r.run_id for r in mine if r.run_id)
    if len(graded) < arm.trials:
        why = f"{len(graded)}/{arm.trials} trials graded"
        return ArmEvidence(arm, counts, run_ids, median, False, why)
    unsubmitted = sum(1 for r in graded if r.submitted is False)
    if arm.kind == "cheat" and unsubmitted:
        # A cheat that never reached a gate proves nothing about the gates.
        why = f"{unsubmitted}/{len(graded)} never submitted: the cheat does not apply here"
        return ArmEvidence(arm, counts, run_ids, median, False, why)
    if arm.expect == "pass":
        held, why = passed == len(graded), f"{passed}/{len(graded)} passed"
    elif arm.expect in ("fail", "not-pass"):
        held, why = passed == 0, f"{len(graded) - passed}/{len(graded)} did not pass"
    else:
        assert median is not None
        held = median < HEADROOM_LIMIT
        why = f"median score {median:.2f} {'<' if held else '>='} {HEADROOM_LIMIT}"
    return ArmEvidence(arm, counts, run_ids, median, held, why)


def decide(
    scenario: str,
    arms: Iterable[Arm],
    results: Iterable[Result],
    guard: GuardOutcome,
    full_scale: Iterable[Result] = (),
) -> Decision:
    """The qualification of `scenario` from the last result of every trial (`full_scale`:
    the time-scale-1 campaign's) and the guard."""
    last = list({r.key: r for r in results}.values())
    last_full = list({r.key: r for r in full_scale}.values())
    arms = list(arms)
    rows = tuple(_evidence(arm, scenario, last_full if arm.full_scale else last) for arm in arms)
    reasons = [f"{row.arm.label} {row.arm.agent}: {row.why}" for row in rows if not row.held]
    if not any(arm.kind == "negative" for arm in arms):
        reasons.append("negative: the scenario has no negative fixture in verify/negative/")
    if guard.clean is not True:
        reasons.append(f"guard: {guard.detail}")
    measured = any(arm.kind == "baseline" for arm in arms)
    return Decision(not reasons, rows, guard, tuple(reasons), measured)
