"""Campaign statistics: pure functions over finished trials (no I/O, no engine).

Definitions (docs/campaigns.md): a trial *counts* when the oracle graded it (`passed`,
`failed`, `rejected`); `aborted` and `error` trials are tallied apart and left out of
every rate, since they say nothing about the agent. pass@k is the unbiased estimator of
Chen et al. (2021), pass^k the chance that k trials drawn without replacement all pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "COUNTED",
    "Comparison",
    "GroupStats",
    "Trial",
    "compare",
    "group_stats",
    "pass_at_k",
    "pass_hat_k",
    "quantile",
    "summarise",
    "wilson",
]

COUNTED = frozenset({"passed", "failed", "rejected"})
"""Verdicts that grade the agent; the others (aborted, error) are not counted."""
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class Trial:
    """What the statistics need of one finished trial."""

    agent: str
    scenario: str
    verdict: str
    score: float | None = None
    time_to_clear_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class GroupStats:
    """One agent x scenario: counts, rates and the spread of what was measured."""

    agent: str
    scenario: str
    n: int
    passed: int
    not_counted: int
    pass_rate: float | None
    pass_at: dict[int, float]
    pass_hat: dict[int, float]
    mean_score: float | None
    score_stderr: float | None
    median_clear_s: float | None
    p90_clear_s: float | None
    mean_tokens: float | None
    mean_cost_usd: float | None


@dataclass(frozen=True)
class Comparison:
    """Agent `a` minus agent `b` in pass rate, paired by scenario, with a 95% interval."""

    a: str
    b: str
    scenarios: int
    difference: float
    low: float
    high: float
    method: str


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the chance at least one of k trials (of n, c passing) passes."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): the chance all of k trials (of n, c passing) pass."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def group_stats(agent: str, scenario: str, trials: Sequence[Trial]) -> GroupStats:
    """The statistics of one agent x scenario's trials."""
    counted = [t for t in trials if t.verdict in COUNTED]
    n = len(counted)
    c = sum(t.verdict == "passed" for t in counted)
    scores = [t.score if t.score is not None else 0.0 for t in counted]
    clears = [t.time_to_clear_s for t in counted if t.time_to_clear_s is not None]
    tokens = [float(t.tokens) for t in trials if t.tokens is not None]
    costs = [t.cost_usd for t in trials if t.cost_usd is not None]
    return GroupStats(
        agent=agent,
        scenario=scenario,
        n=n,
        passed=c,
        not_counted=len(trials) - n,
        pass_rate=c / n if n else None,
        pass_at={k: pass_at_k(n, c, k) for k in range(1, n + 1)},
        pass_hat={k: pass_hat_k(n, c, k) for k in range(1, n + 1)},
        mean_score=statistics.fmean(scores) if scores else None,
        score_stderr=_stderr(scores),
        median_clear_s=quantile(clears, 0.5),
        p90_clear_s=quantile(clears, 0.9),
        mean_tokens=statistics.fmean(tokens) if tokens else None,
        mean_cost_usd=statistics.fmean(costs) if costs else None,
    )


def _stderr(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    return statistics.stdev(values) / math.sqrt(len(values))


def summarise(trials: Iterable[Trial]) -> list[GroupStats]:
    """One `GroupStats` per agent x scenario, in first-seen order."""
    groups: dict[tuple[str, str], list[Trial]] = {}
    for trial in trials:
        groups.setdefault((trial.agent, trial.scenario), []).append(trial)
    return [group_stats(agent, scenario, found) for (agent, scenario), found in groups.items()]


def wilson(passed: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a pass rate (well defined at 0 and n)."""
    if n == 0:
        return 0.0, 1.0
    p = passed / n
    z2 = _Z95**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def compare(a: str, b: str, stats: Sequence[GroupStats]) -> Comparison | None:
    """Pass rate of `a` minus `b` over the scenarios both have counted trials of.

    One scenario: Newcombe's hybrid score interval for a difference of proportions.
    Several: the mean of the per-scenario differences ± 1.96 standard errors, clipped to
    [-1, 1]; the standard error is the larger of the paired one (the spread of those
    differences over the scenarios) and the binomial one of the trials within them, so a
    few scenarios that happen to agree do not give a zero-width interval. None when no
    scenario is shared.
    """
    by_key = {(s.agent, s.scenario): s for s in stats if s.n}
    shared = [s for (agent, s) in by_key if agent == a and (b, s) in by_key]
    if not shared:
        return None
    pairs = [(by_key[(a, s)], by_key[(b, s)]) for s in shared]
    if len(pairs) == 1:
        first, second = pairs[0]
        return _newcombe(a, b, first, second)
    diffs = [_rate(x) - _rate(y) for x, y in pairs]
    mean = statistics.fmean(diffs)
    paired = statistics.stdev(diffs) / math.sqrt(len(diffs))
    within = math.sqrt(sum(_variance(x) + _variance(y) for x, y in pairs)) / len(pairs)
    half = _Z95 * max(paired, within)
    low, high = max(-1.0, mean - half), min(1.0, mean + half)
    return Comparison(a, b, len(pairs), mean, low, high, "paired by scenario, normal")


def _rate(stats: GroupStats) -> float:
    return stats.passed / stats.n


def _variance(stats: GroupStats) -> float:
    """The binomial variance of a group's pass rate, p(1-p)/n."""
    p = _rate(stats)
    return p * (1 - p) / stats.n


def _newcombe(a: str, b: str, first: GroupStats, second: GroupStats) -> Comparison:
    pa, pb = _rate(first), _rate(second)
    la, ua = wilson(first.passed, first.n)
    lb, ub = wilson(second.passed, second.n)
    diff = pa - pb
    low = diff - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    high = diff + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return Comparison(a, b, 1, diff, max(-1.0, low), min(1.0, high), "Newcombe score")
