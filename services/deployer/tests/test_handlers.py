"""The deployer's pure decisions: scenario lookup, event shapes, failure reasons, tokens."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sreforge_deployer import ArmFacts, ComponentStartError, StackSpecError
from sreforge_deployer._handlers import MAX_REASON_CHARS, failure, fault_armed, readiness
from sreforge_deployer._spec import find_scenario_dir, load_scenario_setup
from sreforge_deployer.local import LocalStack

from .conftest import FIXTURES, STAMPEDE, TINY_SCENARIOS


def test_scenario_is_found_under_any_use_case() -> None:
    """`<use_cases>/*/scenarios/<id>` is where a scenario lives; absent → error naming it."""
    assert find_scenario_dir(FIXTURES, "tiny-ok") == TINY_SCENARIOS / "tiny-ok"
    assert find_scenario_dir(STAMPEDE.parents[2], "latency-cache-stampede") == STAMPEDE
    with pytest.raises(StackSpecError, match="'no-such-scenario'"):
        find_scenario_dir(FIXTURES, "no-such-scenario")


def test_stack_failure_reason_names_the_component_and_log_and_is_capped() -> None:
    """The RunFailed reason is the error's own text; a huge log tail is cut, both ends kept."""
    error = ComponentStartError(
        "bookshelf-api", "exited with code 3", log_path=Path("/x/api.log"), log_tail="boom"
    )
    failed = failure("run-1", "stack", error)
    assert failed.stage == "stack"
    assert failed.verdict == "aborted"
    assert "'bookshelf-api'" in failed.reason
    assert "/x/api.log" in failed.reason
    assert "boom" in failed.reason
    huge = failure("run-1", "arm", RuntimeError("start " + "x" * 50_000 + " end"), "error")
    assert len(huge.reason) <= MAX_REASON_CHARS + 20
    assert huge.reason.startswith("RuntimeError: start")
    assert huge.reason.endswith(" end")


def test_fault_armed_carries_base_commit_mode_and_target_rate() -> None:
    """FaultArmed: armed_at as given, the scenario's delivery mode and LOAD_RATE."""
    setup = load_scenario_setup(STAMPEDE)
    at = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    armed = fault_armed("run-1", ArmFacts(at, "a" * 40, "b" * 40, setup))
    assert armed.armed_at == at
    assert armed.base_commit == "a" * 40
    assert armed.fault_commit == "b" * 40
    assert armed.delivery_mode == "arm-deploy-recent"
    assert armed.load_target_rps == 20.0


def test_readiness_is_skipped_without_a_gate() -> None:
    """No gate → skipped; a gate → passed only when load resumed."""
    assert readiness(gate=False, resumed=True) == "skipped"
    assert readiness(gate=True, resumed=True) == "passed"
    assert readiness(gate=True, resumed=False) == "failed"


def test_shared_token_file_is_read_or_created_once(tmp_path: Path) -> None:
    """A configured token file is used as is; a missing one is minted 0600 and then reused."""
    shared = tmp_path / "home" / "trigger.token"
    first = LocalStack(TINY_SCENARIOS / "tiny-ok", webhook_token_file=shared, run_id="r1")
    assert oct(shared.stat().st_mode & 0o777) == "0o600"
    second = LocalStack(TINY_SCENARIOS / "tiny-ok", webhook_token_file=shared, run_id="r2")
    assert first.webhook_token == second.webhook_token == shared.read_text().strip()
    routed = LocalStack(
        TINY_SCENARIOS / "tiny-ok", webhook_url="http://127.0.0.1:1/hooks/", webhook_route="abc"
    )
    assert routed.webhook_url == "http://127.0.0.1:1/hooks/abc"
