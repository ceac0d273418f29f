"""Qualification without an engine: the arms built for a scenario, the decision on
hand-made results (every rule that can disqualify), the headroom.md text, bad input."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sreforge_contracts import load_scenario

from sreforge.campaign._store import Result
from sreforge.cli import main
from sreforge.qualify._arms import Arm, CheatCatalog, arms_for, load_cheats
from sreforge.qualify._decide import GuardOutcome, decide
from sreforge.qualify._errors import QualifyError
from sreforge.qualify._render import render_headroom

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "use-cases" / "bookshelf" / "scenarios" / "latency-cache-stampede"
CLEAN = GuardOutcome(True, "clean")
ARMS = [
    Arm("noop", "noop", "fail", 2),
    Arm("reference", "reference", "pass", 2),
    Arm("negative", "scripted:longer-ttl", "fail", 2),
    Arm("cheat", "scripted:silence-alert", "not-pass", 1),
]


def _results(**verdicts: list[str]) -> list[Result]:
    """Result lines: `agent=[verdict per trial]` (underscores stand for `:` and `-`)."""
    names = {a.agent.replace(":", "_").replace("-", "_"): a.agent for a in ARMS}
    names["base"] = "base"
    found = []
    for key, trials in verdicts.items():
        for n, verdict in enumerate(trials, 1):
            score = 0.95 if verdict == "passed" else 0.1
            found.append(Result(names[key], "s", n, f"run-{key}-{n}", verdict, score))
    return found


GOOD = {
    "noop": ["failed", "failed"],
    "reference": ["passed", "passed"],
    "scripted_longer_ttl": ["failed", "rejected"],
    "scripted_silence_alert": ["failed"],
}


def test_every_arm_as_expected_and_a_clean_guard_qualifies() -> None:
    """All arms held, guard clean, no baseline: QUALIFIED, headroom not measured."""
    decision = decide("s", ARMS, _results(**GOOD), CLEAN)
    assert decision.qualified, decision.reasons
    assert not decision.headroom_measured
    assert next(row.run_ids for row in decision.rows) == ("run-noop-1", "run-noop-2")


@pytest.mark.parametrize(
    ("change", "guard", "reason"),
    [
        ({"noop": ["failed", "passed"]}, CLEAN, "noop noop: 1/2 did not pass"),
        ({"reference": ["passed", "failed"]}, CLEAN, "reference reference: 1/2 passed"),
        ({"scripted_longer_ttl": ["passed", "failed"]}, CLEAN,
         "negative scripted:longer-ttl: 1/2 did not pass"),
        ({"scripted_silence_alert": ["passed"]}, CLEAN,
         "cheat scripted:silence-alert: 0/1 did not pass"),
        ({"reference": ["passed"]}, CLEAN, "reference reference: 1/2 trials graded"),
        ({"noop": ["failed", "error"]}, CLEAN, "noop noop: 1/2 trials graded"),
        ({"scripted_silence_alert": ["aborted"]}, CLEAN,
         "cheat scripted:silence-alert: 0/1 trials graded"),
        ({}, GuardOutcome(False, "2 hit(s)"), "guard: 2 hit(s)"),
        ({}, GuardOutcome(None, "could not run (exit 2): boom"), "guard: could not run"),
    ],
)  # fmt: skip
def test_each_rule_alone_disqualifies(
    change: dict[str, list[str]], guard: GuardOutcome, reason: str
) -> None:
    """One arm off (or the guard), everything else good: DISQUALIFIED, naming why."""
    decision = decide("s", ARMS, _results(**(GOOD | change)), guard)
    assert not decision.qualified
    assert any(found.startswith(reason) for found in decision.reasons), decision.reasons


def test_the_last_line_of_a_retried_trial_counts() -> None:
    """An `error` line followed by the resumed trial's `failed` is one graded trial."""
    results = [*_results(**GOOD), Result("noop", "s", 2, "run-x", "error")]
    results.append(Result("noop", "s", 2, "run-y", "failed", 0.0))
    assert decide("s", ARMS, results, CLEAN).qualified


def test_no_negative_fixture_disqualifies() -> None:
    """A scenario with nothing proving a plausible non-fix fails is not qualified."""
    arms = [arm for arm in ARMS if arm.kind != "negative"]
    decision = decide("s", arms, _results(**GOOD), CLEAN)
    assert decision.reasons == (
        "negative: the scenario has no negative fixture in verify/negative/",
    )


def test_a_saturating_baseline_disqualifies_and_a_weak_one_qualifies() -> None:
    """Baseline median score >= 0.8 is no headroom; below it, measured and fine."""
    arms = [*ARMS, Arm("baseline", "base", "headroom", 2)]
    strong = decide("s", arms, _results(**GOOD, base=["passed", "passed"]), CLEAN)
    assert strong.reasons == ("baseline base: median score 0.95 >= 0.8",)
    weak = decide("s", arms, _results(**GOOD, base=["failed", "passed"]), CLEAN)
    assert weak.qualified
    assert weak.headroom_measured


def test_headroom_md_has_verdict_evidence_headroom_and_provenance() -> None:
    """The file: verdict, one evidence row per arm with counts and run ids, guard, the
    headroom section, the campaign id, date and time scale."""
    when = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)
    good = render_headroom("s", decide("s", ARMS, _results(**GOOD), CLEAN), "c-1", when, 0.1)
    assert good.startswith("# s: QUALIFIED\n")
    assert "campaign `c-1` on 2026-12-01 20:30 UTC at time scale 0.1 (smoke verdicts)" in good
    row = "| negative | `scripted:longer-ttl` | every trial fails | 2 | failed 1, rejected 1 |"
    assert row in good
    assert "run-scripted_longer_ttl-1 run-scripted_longer_ttl-2 |" in good
    assert "`sreforge guard`: clean" in good
    assert "## Headroom\n\nNot measured: no baseline agent" in good
    arms = [*ARMS, Arm("baseline", "base", "headroom", 2)]
    results = _results(**(GOOD | {"noop": ["passed", "failed"]}), base=["failed", "failed"])
    bad = render_headroom("s", decide("s", arms, results, CLEAN), "c-2", when, 1.0)
    assert bad.startswith("# s: DISQUALIFIED\n")
    assert "## Why not qualified\n\n- noop noop: 1/2 did not pass" in bad
    assert "| `base` | 2 | failed 2 | 0.10 | yes: median score 0.10 < 0.8 |" in bad


def test_arms_for_the_scenario_are_noop_reference_negatives_cheats_baselines() -> None:
    """latency-cache-stampede: noop, reference, its two negatives N times; the bookshelf
    cheats that apply to its stack once each; baselines N times; a clash is refused."""
    scenario = load_scenario(SCENARIO)
    cheats = load_cheats(SCENARIO.parents[1])
    assert cheats is not None
    arms = arms_for(scenario, 3, cheats, ("openai",))
    kinds = [(arm.kind, arm.agent, arm.trials) for arm in arms]
    assert kinds[:4] == [
        ("noop", "noop", 3),
        ("reference", "reference", 3),
        ("negative", "scripted:cut-upstream-timeout", 3),
        ("negative", "scripted:longer-ttl", 3),
    ]
    assert ("cheat", "scripted:silence-alert", 1) in kinds
    assert kinds[-3] == ("baseline", "openai", 3)
    assert [(a.label, a.agent, a.trials) for a in arms[-2:]] == [
        ("noop @ scale 1", "noop", 1),
        ("reference @ scale 1", "reference", 1),
    ]
    assert not any(a.full_scale for a in arms_for(scenario, 3, cheats, (), time_scale=1.0))
    played = {agent for kind, agent, _ in kinds if kind == "cheat"}
    patch_only = {name for name, kinds in cheats.profiles.items() if "incident" not in kinds}
    assert patch_only == {"forged-test-reports"}
    elsewhere_only = {name for name, only in cheats.only.items() if SCENARIO.name not in only}
    assert "master-process-metrics" in elsewhere_only  # memory-leak-restarts' own
    assert played == {f"scripted:{name}" for name, _ in cheats.cheats} - {
        f"scripted:{name}" for name in patch_only | elsewhere_only
    }
    elsewhere = CheatCatalog(cheats.folder, (("x", ("other-stack",)),))
    assert [a.kind for a in arms_for(scenario, 1, elsewhere, ())].count("cheat") == 0
    limited = CheatCatalog(cheats.folder, (("x", ()), ("y", ())), {"y": ("other-scenario",)})
    assert [a.agent for a in arms_for(scenario, 1, limited, ()) if a.kind == "cheat"] == [
        "scripted:x"
    ]
    with pytest.raises(QualifyError, match="--baseline: 'noop'"):
        arms_for(scenario, 1, cheats, ("noop",))


def test_a_cheat_catalog_naming_a_missing_fixture_is_refused(tmp_path: Path) -> None:
    """A catalog entry without its file would make a run fail for the wrong reason."""
    (tmp_path / "cheats.toml").write_text('folder = "."\n[[cheat]]\nname = "ghost"\n')
    with pytest.raises(QualifyError, match=r"cheat ghost: no ghost\[.patch\|.sh\]"):
        load_cheats(tmp_path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trials", "0"], "--trials: 0 must be at least 1"),
        (["--time-scale", "1.5"], "--time-scale: 1.5 must be in (0, 1]"),
        (["--concurrency", "0"], "--concurrency: 0 must be at least 1"),
        (["--baseline", "reference"], "--baseline: 'reference'"),
    ],
)
def test_bad_input_exits_2_naming_the_field(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any run, exit 2, the flag named on stderr."""
    assert main(["qualify", str(SCENARIO), *argv]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_scenario_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario id that is not under use-cases/ is named, exit 2."""
    assert main(["qualify", "no-such-scenario"]) == 2
    assert "scenario: no scenario 'no-such-scenario'" in capsys.readouterr().err


def test_the_time_scale_1_arms_are_judged_on_their_own_campaigns_results() -> None:
    """noop and reference at time scale 1: missing or wrong there disqualifies, even when
    the scaled arms all held; right there qualifies."""
    arms = [
        *ARMS,
        Arm("noop", "noop", "fail", 1, True),
        Arm("reference", "reference", "pass", 1, True),
    ]
    scaled = _results(**GOOD)
    missing = decide("s", arms, scaled, CLEAN)
    assert missing.reasons == (
        "noop @ scale 1 noop: 0/1 trials graded",
        "reference @ scale 1 reference: 0/1 trials graded",
    )
    wrong = [Result("noop", "s", 1, "full-noop", "passed", 0.9),
             Result("reference", "s", 1, "full-ref", "passed", 0.99)]  # fmt: skip
    assert decide("s", arms, scaled, CLEAN, wrong).reasons == (
        "noop @ scale 1 noop: 0/1 did not pass",
    )
    right = [Result("noop", "s", 1, "full-noop", "failed", 0.0), wrong[1]]
    good = decide("s", arms, scaled, CLEAN, right)
    assert good.qualified, good.reasons
    when = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)
    text = render_headroom("s", good, "c-1", when, 0.1, "c-2")
    assert "; the time-scale-1 arms from campaign `c-2`." in text
    assert "| noop @ scale 1 | `noop` | every trial fails | 1 | failed 1 | yes" in text
    assert "full-ref |" in text


def test_a_cheat_that_never_submitted_does_not_count_as_caught() -> None:
    """A cheat whose patch did not apply to the scenario's tree fails for want of a
    submission, which proves no gate: DISQUALIFIED, naming it; a submitted cheat that
    failed holds."""
    results = [r for r in _results(**GOOD) if r.agent != "scripted:silence-alert"]
    unapplied = Result("scripted:silence-alert", "s", 1, "run-c", "failed", 0.0, submitted=False)
    decision = decide("s", ARMS, [*results, unapplied], CLEAN)
    assert decision.reasons == (
        "cheat scripted:silence-alert: 1/1 never submitted: the cheat does not apply here",
    )
    caught = Result("scripted:silence-alert", "s", 1, "run-c", "failed", 0.35, submitted=True)
    assert decide("s", ARMS, [*results, caught], CLEAN).qualified


def test_the_bookshelf_cheats_bundled_with_one_fix_are_limited_to_its_scenario() -> None:
    """The catalog's own limits: the cheats carrying latency-cache-stampede's fix run on it
    and on no other bookshelf scenario."""
    cheats = load_cheats(SCENARIO.parents[1])
    assert cheats is not None
    bundled = {"fabricated-answers", "deleted-test", "forcing-conftest"}
    assert bundled <= set(cheats.applying_to("bookshelf-flask", SCENARIO.name))
    assert not bundled & set(cheats.applying_to("bookshelf-flask", "bad-deploy-5xx"))


def test_a_patch_scenario_plays_only_the_cheats_of_its_profile() -> None:
    """patch-stale-sort-keys: the cheats listed for the patch profile (forged test
    reports) play against it; the incident cheats (telemetry, alerts) do not."""
    scenario = load_scenario(SCENARIO.parents[1] / "scenarios" / "patch-stale-sort-keys")
    cheats = load_cheats(SCENARIO.parents[1])
    assert cheats is not None
    played = [arm.agent for arm in arms_for(scenario, 2, cheats, ()) if arm.kind == "cheat"]
    assert played == ["scripted:forged-test-reports"]
