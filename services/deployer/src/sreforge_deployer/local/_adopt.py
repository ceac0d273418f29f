"""Adopting a run's local stack after the deployer that started it stopped.

The stack's components run in their own process groups (no `--die-with-parent`) and
its state file (`stack.json`) outlives the deployer, so a restarted deployer can take
the stack over: lease its ports again, know its groups, read back what arming
recorded, and go on arming, redeploying and tearing it down. A stack whose boot did
not finish, any of whose components died, or whose Prometheus or Alertmanager no
longer answers, is not adopted (`StackLostError`): half a stack is never handed to the
rest of the run. The one exception is the scenario's service: arming and the redeploy
stop it and start it again, so a deployer killed between the two leaves it gone; the
stage that is repeated starts it again (it is adopted as not running). A live
component's own health check is not asked: the service may be slow by design (the
scenario's fault, a loaded machine) or restarting mid-redeploy; the redeploy's
readiness gate and the grading judge it.

This module fills in a `LocalStack`'s private state: it is the one place outside
`_stack.py` that does, and only for a stack nobody else holds.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from sreforge_deployer._adoption import check_answering, reclaim_ports, rendered_again
from sreforge_deployer._errors import StackLostError
from sreforge_deployer._process import Component
from sreforge_deployer._render import RenderedObservability
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS
from sreforge_deployer._workspace import Workspace
from sreforge_deployer.local._stack import LocalStack
from sreforge_deployer.local._state import GroupRecord, StackRecord

__all__ = ["adopt_stack"]

_HEALTH_DEADLINE_S = 5.0
_POLL_S = 0.1


def adopt_stack(
    scenario_dir: Path,
    record: StackRecord,
    *,
    settings: DeployerSettings,
    webhook_url: str | None,
    webhook_token_file: Path | None,
) -> LocalStack:
    """The stack `record` describes, held by this process from now on; or `StackLostError`."""
    stack = LocalStack(
        scenario_dir,
        time_scale=record.time_scale,
        run_id=record.run_id,
        webhook_url=webhook_url,
        webhook_token_file=webhook_token_file,
        settings=settings,
    )
    names = [c.name for c in stack.spec.components] + [ALERTMANAGER, PROMETHEUS]
    gone = _check_groups(record, names, restartable=stack.spec.service)
    stack._leases = reclaim_ports(record.run_id, record.ports, record.port_lock_dir, settings)
    try:
        _restore(stack, record, gone)
        check_answering(
            stack.run_id, [f"{stack.url(PROMETHEUS)}/-/ready", f"{stack.url(ALERTMANAGER)}/-/ready"]
        )
    except BaseException:
        for lease in stack._leases.values():
            lease.release()
        raise
    stack._record().write()  # the owner is this process now (`stack down` asks it)
    return stack


def _check_groups(record: StackRecord, names: list[str], *, restartable: str) -> set[str]:
    """The components that are gone but may be: at most `restartable`; else `StackLostError`."""
    missing = [name for name in names if name not in record.groups]
    if missing:
        raise StackLostError(
            f"run {record.run_id}: its stack's boot did not finish (never started: "
            f"{', '.join(missing)})"
        )
    dead = [name for name, group in record.groups.items() if not _running(group)]
    lost = [name for name in dead if name != restartable]
    if lost:
        raise StackLostError(f"run {record.run_id}: components {', '.join(lost)} are gone")
    return set(dead)


def _running(group: GroupRecord) -> bool:
    try:
        leader = psutil.Process(group.pgid)
        alive = leader.status() != psutil.STATUS_ZOMBIE
        return alive and abs(leader.create_time() - group.leader_started_at) < 1.0
    except psutil.NoSuchProcess:
        return False


def _restore(stack: LocalStack, record: StackRecord, gone: set[str]) -> None:
    wiring = stack._wiring()
    stack.workspace = Workspace(wiring.workspace_dir)
    stack.built_commit = record.built_commit
    stack.base_commit = record.base_commit or record.built_commit
    stack.fault_commit = record.fault_commit
    stack.armed_at = record.armed_at
    if record.armed_at is not None and stack.setup.delivery_mode == "arm-runtime-notrace":
        stack._runtime_env = dict(stack.setup.runtime_env)
    stack.rendered = _rendered(stack)
    # A gone group's pgid may belong to a stranger by now: it is never signalled.
    live = {name: group for name, group in record.groups.items() if name not in gone}
    stack._groups_seen = {name: group.pgid for name, group in live.items()}
    for spec in stack.spec.components:
        launch = wiring.launch(spec, stack._runtime_env)
        group = live.get(spec.name)
        stack._components[spec.name] = Component(
            launch, adopted_pgid=None if group is None else group.pgid
        )


def _rendered(stack: LocalStack) -> RenderedObservability:
    obs = stack.identity.layout.observability
    receiver = stack.webhook_url or "http://127.0.0.1:9/"  # timings do not depend on it
    values = stack._wiring().template_values(receiver, obs / "webhook.token")
    templates = stack.spec.root / stack.spec.observability
    return rendered_again(templates, obs, values, stack.time_scale)
