"""The CI gate: a run's submission tested on a jailed clone of its workspace, then merged.

`host_checkout(target, settings, confined=)` gives a `HostCheckout` (the `Checkout` both
topologies use): `gate(diff)` runs the scenario's test sets (`submitted`, `handoff`,
`hidden`; `ci_protection` reads which) and returns a `CiRun`, `prepare`/`merge` put the
tested tree on the workspace's main; the scenario's hidden and graded sets are judged
in a process of their own against the submission served (`judge_of`). `CiCheckout` and
`merge_and_checkout` are the same steps without the deployer's settings (tests, `bench/`).
"""

from sreforge_deployer.gate._checkout import HostCheckout, ci_protection, host_checkout, judge_of
from sreforge_deployer.gate._ci import (
    MERGE_MESSAGE,
    CiCheckout,
    CiRun,
    ci_clones,
    merge_and_checkout,
    remove_ci_clones,
)
from sreforge_deployer.gate._gate import CiProtection, SetOutcome
from sreforge_deployer.gate._judge import Judge, judge_for
from sreforge_deployer.gate._test_sets import GRADED_SETS, ChangedTests

__all__ = [
    "GRADED_SETS",
    "MERGE_MESSAGE",
    "ChangedTests",
    "CiCheckout",
    "CiProtection",
    "CiRun",
    "HostCheckout",
    "Judge",
    "SetOutcome",
    "ci_clones",
    "ci_protection",
    "host_checkout",
    "judge_for",
    "judge_of",
    "merge_and_checkout",
    "remove_ci_clones",
]
