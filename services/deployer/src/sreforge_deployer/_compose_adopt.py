"""Adopting a run's compose project after the deployer that started it stopped.

The project's containers outlive the deployer and its state file (`compose.json`)
says what the boot and the arm recorded, so a restarted deployer can take the stack
over: lease its ports again, read back the workspace, image, relay and arming, and
go on arming, redeploying and tearing it down. A project whose boot did not finish,
or any of whose containers stopped, is not adopted (`StackLostError`): half a stack
is never handed to the rest of the run.

This module fills in a `ComposeStack`'s private state: it is the one place outside
`_compose_stack.py` that does, and only for a stack nobody else holds (as `_adopt`
does for a `LocalStack`).
"""

from __future__ import annotations

from pathlib import Path

from sreforge_deployer._adoption import check_answering, reclaim_ports, rendered_again
from sreforge_deployer._compose_file import RELAY_SERVICE, WebhookRelay, template_values
from sreforge_deployer._compose_networks import GATEWAY
from sreforge_deployer._compose_project import bridge_gateway
from sreforge_deployer._compose_stack import ComposeStack
from sreforge_deployer._compose_state import ComposeRecord
from sreforge_deployer._errors import DeployerError, StackLostError
from sreforge_deployer._ports import PortLease
from sreforge_deployer._render import RenderedObservability
from sreforge_deployer._settings import DeployerSettings
from sreforge_deployer._wiring import ALERTMANAGER, PROMETHEUS
from sreforge_deployer._workspace import Workspace

__all__ = ["adopt_compose_stack"]

_HEALTH_DEADLINE_S = 5.0
_POLL_S = 0.1


def adopt_compose_stack(
    scenario_dir: Path,
    record: ComposeRecord,
    *,
    settings: DeployerSettings,
    webhook_url: str | None,
    webhook_token_file: Path | None,
) -> ComposeStack:
    """The project `record` describes, held by this process from now on; or
    `StackLostError`."""
    if not record.booted:
        raise StackLostError(f"run {record.run_id}: its compose project's boot did not finish")
    stack = ComposeStack(
        scenario_dir,
        time_scale=record.time_scale,
        run_id=record.run_id,
        webhook_url=webhook_url,
        webhook_route=record.webhook_route,
        webhook_token_file=webhook_token_file,
        settings=settings,
    )
    if stack.project.name != record.project:
        raise StackLostError(f"run {record.run_id}: state file names project {record.project}")
    leases = reclaim_ports(record.run_id, record.ports, record.port_lock_dir, settings)
    try:
        _restore(stack, record, leases)
        _check_healthy(stack)
    except BaseException:
        for lease in leases.values():
            lease.release()
        raise
    stack._record(booted=True).write()  # the owner is this process now
    return stack


def _restore(stack: ComposeStack, record: ComposeRecord, leases: dict[str, PortLease]) -> None:
    stack._relay_lease = leases.pop(RELAY_SERVICE, None)
    stack._leases = leases
    target = stack._webhook_target()
    if stack._relay_lease is not None and target is not None:
        stack._relay = WebhookRelay(bridge_gateway(), stack._relay_lease.port, *target)
    stack._image = record.image
    stack.workspace = Workspace(stack.run_dir / "workspace")
    stack.base_commit = record.base_commit
    stack.fault_commit = record.fault_commit
    stack.armed_at = record.armed_at
    if record.armed_at is not None and stack.setup.delivery_mode == "arm-runtime-notrace":
        stack._runtime_env = dict(stack.setup.runtime_env)
    stack.rendered = _rendered(stack)


def _rendered(stack: ComposeStack) -> RenderedObservability:
    obs = stack.run_dir / "observability"
    values = template_values(stack.spec, "http://127.0.0.1:9/", obs / "webhook.token")
    templates = stack.spec.root / stack.spec.observability
    return rendered_again(templates, obs, values, stack.time_scale)


def _check_healthy(stack: ComposeStack) -> None:
    """Every container running, and Prometheus answering through the gateway. The
    service's own health is not asked: with the fault armed it may be too slow to
    answer at once, and a slow service is not a lost one."""
    expected = {c.name for c in stack.spec.components} | {PROMETHEUS, ALERTMANAGER, GATEWAY}
    try:
        running = stack.project.running()
    except DeployerError as error:
        raise StackLostError(f"run {stack.run_id}: {error}") from error
    gone = sorted(expected - running)
    if gone:
        raise StackLostError(f"run {stack.run_id}: containers of {', '.join(gone)} not running")
    ready = [f"{stack.url(PROMETHEUS)}/-/ready", f"{stack.url(ALERTMANAGER)}/-/ready"]
    check_answering(stack.run_id, ready)
