"""The campaign statistics: pass@k, pass^k, spread, quantiles, the A/B comparison."""

from __future__ import annotations

import math
import random

import pytest

from sreforge.campaign._stats import (
    Trial,
    compare,
    group_stats,
    pass_at_k,
    pass_hat_k,
    quantile,
    summarise,
    wilson,
)


def test_pass_at_k_matches_chen_et_al_and_its_edges() -> None:
    """1 - C(n-c,k)/C(n,k): the textbook values, 1 once fewer than k trials fail, 0 at c=0."""
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_at_k(5, 2, 4) == 1.0  # only 3 fail: any 4 include a pass


def test_pass_at_k_is_the_chance_some_of_k_random_trials_passes() -> None:
    """The estimator equals the exact probability over every k-subset (here by enumeration)."""
    import itertools

    outcomes = [True, False, True, False, False, False]
    subsets = list(itertools.combinations(outcomes, 3))
    assert pass_at_k(6, 2, 3) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_hat_k(6, 2, 2) == pytest.approx(
        sum(all(s) for s in itertools.combinations(outcomes, 2)) / math.comb(6, 2)
    )


def test_pass_hat_k_is_all_k_pass() -> None:
    """C(c,k)/C(n,k): 1 when every trial passed, 0 when fewer than k passed."""
    assert pass_hat_k(5, 5, 5) == 1.0
    assert pass_hat_k(5, 4, 5) == 0.0
    assert pass_hat_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_hat_k(4, 3, 2) == pytest.approx(3 / 6)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, 1, 0), (3, 1, 4)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    """c outside [0, n] or k outside [1, n] is a bug in the caller, not a number."""
    with pytest.raises(ValueError, match="need 0 <= c <= n"):
        pass_at_k(n, c, k)


def test_quantile_interpolates_like_numpy() -> None:
    """Linear interpolation between order statistics; None for nothing measured."""
    assert quantile([], 0.5) is None
    assert quantile([7.0], 0.9) == 7.0
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == pytest.approx(2.5)
    assert quantile([float(v) for v in range(1, 11)], 0.9) == pytest.approx(9.1)


def test_group_stats_counts_graded_trials_only() -> None:
    """Aborted and error trials are tallied apart; rates, score spread and times come from
    the graded ones (a graded trial without a score counts as 0)."""
    trials = [
        Trial("a", "s", "passed", 0.9, 10.0, tokens=100, cost_usd=0.5),
        Trial("a", "s", "passed", 0.7, 20.0, tokens=300, cost_usd=1.5),
        Trial("a", "s", "failed", 0.2),
        Trial("a", "s", "rejected", None),
        Trial("a", "s", "aborted", None),
    ]
    stats = group_stats("a", "s", trials)
    assert (stats.n, stats.passed, stats.not_counted) == (4, 2, 1)
    assert stats.pass_rate == 0.5
    assert stats.pass_at[1] == pytest.approx(0.5)
    assert stats.pass_hat[4] == 0.0
    assert sorted(stats.pass_at) == [1, 2, 3, 4]
    scores = [0.9, 0.7, 0.2, 0.0]
    mean = sum(scores) / 4
    spread = math.sqrt(sum((s - mean) ** 2 for s in scores) / 3) / 2
    assert stats.mean_score == pytest.approx(mean)
    assert stats.score_stderr == pytest.approx(spread)
    assert stats.median_clear_s == pytest.approx(15.0)
    assert stats.p90_clear_s == pytest.approx(19.0)
    assert stats.mean_tokens == 200
    assert stats.mean_cost_usd == pytest.approx(1.0)


def test_a_group_with_nothing_graded_has_no_rates() -> None:
    """Only aborted trials: n is 0 and every rate is absent, not 0."""
    stats = group_stats("a", "s", [Trial("a", "s", "aborted")])
    assert stats.n == 0
    assert stats.pass_rate is None
    assert stats.pass_at == {}
    assert stats.mean_score is None
    assert stats.score_stderr is None


def test_summarise_groups_by_agent_and_scenario_in_first_seen_order() -> None:
    """One row per agent x scenario."""
    trials = [Trial("b", "s1", "failed"), Trial("a", "s1", "passed"), Trial("b", "s1", "passed")]
    rows = summarise(trials)
    assert [(r.agent, r.scenario, r.n, r.passed) for r in rows] == [
        ("b", "s1", 2, 1),
        ("a", "s1", 1, 1),
    ]


def test_wilson_interval_is_sane_at_the_edges() -> None:
    """5/5 has a lower bound well below 1 (about 0.57); 0/5 an upper one above 0."""
    low, high = wilson(5, 5)
    assert high == 1.0
    assert low == pytest.approx(0.5655, abs=1e-3)
    assert wilson(0, 5) == pytest.approx((0.0, 1 - 0.5655), abs=1e-3)


def test_one_scenario_ab_uses_newcombe() -> None:
    """5/5 vs 0/5 on one scenario: difference 1 with an interval that excludes 0 but is wide."""
    rows = summarise([Trial("ref", "s", "passed")] * 5 + [Trial("noop", "s", "failed")] * 5)
    found = compare("ref", "noop", rows)
    assert found is not None
    assert found.difference == 1.0
    assert found.high == 1.0
    assert 0.3 < found.low < 0.5
    assert found.scenarios == 1


def test_ab_over_several_scenarios_is_paired_by_scenario() -> None:
    """The mean of per-scenario differences; a scenario only one agent ran is left out;
    two scenarios with the same difference still get an interval of real width."""
    trials = [
        *[Trial("a", "s1", "passed")] * 4,
        *[Trial("b", "s1", "passed"), Trial("b", "s1", "failed")] * 2,
        *[Trial("a", "s2", "passed"), Trial("a", "s2", "failed")] * 2,
        *[Trial("b", "s2", "failed")] * 4,
        Trial("a", "s3", "passed"),
    ]
    found = compare("a", "b", summarise(trials))
    assert found is not None
    assert found.scenarios == 2
    assert found.difference == pytest.approx(0.5)
    assert found.low < 0.5 < found.high
    assert compare("a", "nobody", summarise(trials)) is None


def test_paired_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    """Simulated campaigns (10 scenarios, 10 trials each, a true difference of 0.2): the
    interval contains 0.2 in at least about 95% of them (normal approximation; the
    larger-of-two standard error makes it, if anything, conservative)."""
    rng = random.Random(7)
    covered = 0
    for _ in range(300):
        trials = []
        for scenario in range(10):
            base = rng.uniform(0.2, 0.6)
            for agent, rate in (("a", base + 0.2), ("b", base)):
                for _ in range(10):
                    verdict = "passed" if rng.random() < rate else "failed"
                    trials.append(Trial(agent, f"s{scenario}", verdict))
        found = compare("a", "b", summarise(trials))
        assert found is not None
        covered += found.low <= 0.2 <= found.high
    assert 0.85 <= covered / 300 <= 0.995
