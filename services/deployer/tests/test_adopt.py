"""A stack outlives its deployer: another process adopts it, redeploys it, tears it down.

`stack up --arm` runs in its own process and is SIGKILLed once armed (as a deployer
dies mid-run); the test process then adopts the stack from its state file.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import gone
from sreforge_deployer import DeployerSettings, StackLostError
from sreforge_deployer.local import LocalTopologies, StackRecord, list_stacks

from .conftest import FIXTURES, poll
from .test_stack_cli import _StackUp

pytestmark = pytest.mark.integration


@pytest.fixture
def orphaned(tmp_path: Path) -> Iterator[tuple[StackRecord, DeployerSettings]]:
    """An armed tiny stack whose owner was SIGKILLed; every group killed afterwards."""
    root = tmp_path / "stacks"
    up = _StackUp(root, "--arm")
    try:
        record = poll(
            lambda: next((r for r in list_stacks(root) if r.armed_at is not None), None),
            timeout=60,
            message=f"an armed stack record:\n{up.output()}",
        )
        os.killpg(up.process.pid, signal.SIGKILL)
        up.process.wait(timeout=10)
        yield record, DeployerSettings(runs_root=root, use_cases=FIXTURES)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.process.pid, signal.SIGKILL)
        for left in list_stacks(root):
            for group in left.groups.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group.pgid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_an_armed_stack_is_adopted_redeployed_and_torn_down_clean(
    orphaned: tuple[StackRecord, DeployerSettings],
) -> None:
    """What arming recorded comes back; the redeploy restarts the service; nothing is left."""
    record, settings = orphaned
    topology = LocalTopologies(settings).adopt(record.run_id)
    target = topology.ci_target()
    assert target is not None
    assert target.base_commit == record.base_commit
    facts = topology.arm()
    assert facts.armed_at == record.armed_at
    before = record.groups["tiny-api"].pgid
    topology.redeploy()
    after = topology.stack.pgids()["tiny-api"]
    assert after != before
    assert gone(before)
    assert topology.down() == []


@pytest.mark.timeout(120)
def test_a_stack_missing_a_component_is_not_adopted(
    orphaned: tuple[StackRecord, DeployerSettings],
) -> None:
    """Half a stack is never handed on: StackLostError naming the dead component."""
    record, settings = orphaned
    os.killpg(record.groups["tiny-upstream"].pgid, signal.SIGKILL)
    poll(lambda: gone(record.groups["tiny-upstream"].pgid), timeout=10, message="its death")
    with pytest.raises(StackLostError, match="tiny-upstream"):
        LocalTopologies(settings).adopt(record.run_id)
    assert LocalTopologies(settings).down_elsewhere(record.run_id) == []


@pytest.mark.timeout(120)
def test_a_service_gone_between_stop_and_start_is_adopted_and_started_again(
    orphaned: tuple[StackRecord, DeployerSettings],
) -> None:
    """A deployer killed mid-restart of the service (arming, the redeploy) leaves it gone:
    the stack is adopted all the same, the gone group is never signalled, and the repeated
    stage starts the service again."""
    record, settings = orphaned
    service = record.groups["tiny-api"].pgid
    os.killpg(service, signal.SIGKILL)
    poll(lambda: gone(service), timeout=10, message="the service's death")
    topology = LocalTopologies(settings).adopt(record.run_id)
    assert "tiny-api" not in topology.stack.pgids()
    topology.redeploy()
    restarted = topology.stack.pgids()["tiny-api"]
    assert restarted != service
    assert not gone(restarted)
    assert topology.down() == []
