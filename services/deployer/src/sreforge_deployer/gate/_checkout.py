"""CI and the merge of a run's submission on a jailed clone of its workspace, on the host.

Both topologies gate this way (the run's workspace is a host folder on each), so this is
their `Checkout` (`sreforge_deployer._topology`); every call goes through `guarded`.
"""

from __future__ import annotations

from pathlib import Path

from sreforge_contracts import ContractError, Scenario, find_scenario

from sreforge_deployer._confine import confinement_for
from sreforge_deployer._errors import StackSpecError
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._topology import CiTarget, guarded
from sreforge_deployer.gate._base_reports import BaseReports
from sreforge_deployer.gate._ci import CiCheckout, CiRun, merge_and_checkout
from sreforge_deployer.gate._gate import CiProtection
from sreforge_deployer.gate._judge import Judge, judge_for
from sreforge_deployer.gate._test_sets import ChangedTests, SetName

__all__ = ["HostCheckout", "ci_protection", "host_checkout", "judge_of"]


def ci_protection(use_cases: Path, scenario_id: str) -> CiProtection:
    """The scenario's hidden CI tests (`verify/ci/`, if present) and `ci_changed_tests`;
    a patch scenario's graded sets (`verify/fail_to_pass/`, `verify/pass_to_pass/`)."""
    scenario = _scenario(use_cases, scenario_id)
    hidden = scenario.ci_tests_dir
    graded: tuple[tuple[SetName, Path], ...] = ()
    if scenario.manifest.profile == "patch":
        graded = (
            ("fail_to_pass", scenario.fail_to_pass_dir),
            ("pass_to_pass", scenario.pass_to_pass_dir),
        )
    return CiProtection(
        hidden_dir=hidden if hidden.is_dir() else None,
        changed=ChangedTests.from_entries(scenario.manifest.verify.ci_changed_tests),
        graded=graded,
    )


def judge_of(settings: DeployerSettings, scenario_id: str) -> Judge:
    """The judge of the scenario's hidden and graded sets, on this deployer's interpreter
    and jail."""
    return judge_for(
        _scenario(settings.use_cases, scenario_id).path,
        python=settings.python,
        bwrap_path=settings.bwrap_path,
        port_lock_dir=settings.port_lock_dir,
        port_range=(settings.port_range_low, settings.port_range_high),
        timeout_s=settings.ci_timeout_seconds,
    )


def _scenario(use_cases: Path, scenario_id: str) -> Scenario:
    try:
        return find_scenario(use_cases, scenario_id)
    except ContractError as error:
        raise StackSpecError(str(error)) from error


def host_checkout(target: CiTarget, settings: DeployerSettings, *, confined: bool) -> HostCheckout:
    """A clone of the run workspace at its base commit (`confined`: the tests run jailed)."""
    confinement = confinement_for(settings.bwrap_path) if confined else None
    checkout = CiCheckout(target.workspace, target.base_commit, confinement, run_id=target.run_id)
    return HostCheckout(checkout, target, settings)


class HostCheckout:
    """CI and the merge on a clone of a run workspace (`CiCheckout`)."""

    def __init__(self, checkout: CiCheckout, target: CiTarget, settings: DeployerSettings):
        self.checkout = checkout
        self._target = target
        self._settings = settings

    def gate(self, diff: str) -> CiRun:
        """The scenario's CI test sets on the submission, jailed."""
        settings = self._settings

        def run() -> CiRun:
            scenario_id = self._target.scenario_id
            protection = ci_protection(settings.use_cases, scenario_id)
            judged = protection.hidden_dir is not None or protection.graded
            judge = judge_of(settings, scenario_id) if judged else None
            return self.checkout.run(
                diff,
                settings.python,
                settings.ci_timeout_seconds,
                settings.ci_output_max_chars,
                protection,
                judge,
                BaseReports(settings.cache_at / "ci-base") if settings.ci_base_reports else None,
            )

        return guarded(run)

    def prepare(self, diff: str) -> str | None:
        """The submission's tree id, None when it does not apply."""
        tree, _ = guarded(lambda: self.checkout.prepare(diff))
        return tree

    def merge(self, tree: str) -> None:
        """Merge `tree` into the workspace's main and check it out."""
        guarded(lambda: merge_and_checkout(self.checkout, tree))

    def close(self) -> None:
        """Remove the clone."""
        self.checkout.close()
