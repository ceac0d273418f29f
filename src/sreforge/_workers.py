"""Worker hosts: the services that touch a run's stack, pinned to the host that owns it.

`sreforge serve --worker HOST` runs the services as worker host HOST on a shared NATS.
The deployer's RunRequested route becomes the work queue's (`workers-runs` on stream
`SREFORGE_WORK`, one durable every host pulls from, only while the host has a free stack
slot); a host takes a run by creating its owner key (`deployer.owner.<run>`) under its
lease (`deployer.host.<host>`, kept by the deployer). Every other route of a pinned
service (context, runner, deployer, oracle: they reach the stack's loopback endpoints or
its processes) reads the host's own durable (`<durable>-<host>`) and acts only on runs
this host's current lease owns. The correlator, trigger and recorder stay as they are:
any host's copy may handle any run (the trigger gets the webhooks of its own host's
stacks). The embedded default (`sreforge up`, `sreforge run`) uses none of this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from sreforge_bus import (
    WORK_DURABLE,
    WORK_SOURCE_SUBJECT,
    Bus,
    Context,
    Fenced,
    Handled,
    HostLease,
    Route,
    Service,
    host_durable,
)

__all__ = ["PINNED_SERVICES", "WORK_ROUTE", "pinned_durables", "worker_services"]

log = structlog.get_logger("sreforge.workers")

PINNED_SERVICES = ("context", "runner", "deployer", "oracle")
"""The services that act on a run's stack, so only on the host that owns it."""
WORK_ROUTE = ("deployer", "deployer-stack")
"""The route run requests take: in worker mode, from the work queue instead."""


def pinned_durables(service: Service, host: str) -> list[str]:
    """The durables `service` reads as worker host `host` (for the bus permissions)."""
    if service.name not in PINNED_SERVICES:
        return [route.consumer.durable for route in service.routes]
    return [
        WORK_DURABLE if _is_work(service, route) else host_durable(route.consumer.durable, host)
        for route in service.routes
    ]


def worker_services(services: Sequence[Service], lease: HostLease, slots: int) -> list[Service]:
    """`services` as worker host `lease.host` runs them (see the module docstring)."""
    return [_as_worker(service, lease, slots) for service in services]


def _is_work(service: Service, route: Route[Any]) -> bool:
    return (service.name, route.consumer.durable) == WORK_ROUTE


def _as_worker(service: Service, lease: HostLease, slots: int) -> Service:
    if service.name not in PINNED_SERVICES:
        return service
    held = getattr(getattr(service, "deployer", None), "held", None)
    routes = tuple(
        _work_route(route, lease, slots, held) if _is_work(service, route) else
        _pinned_route(route, lease)
        for route in service.routes
    )  # fmt: skip
    if service.name != WORK_ROUTE[0]:
        return dataclasses.replace(service, routes=routes)

    async def acquire(bus: Bus) -> None:
        await lease.acquire(bus.runs)

    async def release(bus: Bus) -> None:  # after the stop hooks tore the stacks down
        await lease.release(bus.runs)

    return dataclasses.replace(
        service,
        routes=routes,
        tasks=(*service.tasks, lease.keep),
        on_start=(acquire, *service.on_start),
        on_stop=(*service.on_stop, release),
    )


def _pinned_route(route: Route[Any], lease: HostLease) -> Route[Any]:
    """Route on the host's own durable; a run this host's lease does not own is skipped."""
    inner = route.handler

    async def handler(message: Any, context: Context) -> Handled:
        run_id = getattr(message, "run_id", None)
        if not isinstance(run_id, str) or not await lease.owns(context.runs, run_id):
            return ()
        if (why := lease.fenced()) is not None:
            context.log.error("worker.fenced_skip", run_id=run_id, host=lease.host, reason=why)
            return ()
        return await inner(message, context)

    durable = host_durable(route.consumer.durable, lease.host)
    consumer = dataclasses.replace(route.consumer, durable=durable, deliver_new=True)
    return dataclasses.replace(route, consumer=consumer, handler=handler)


def _work_route(
    route: Route[Any], lease: HostLease, slots: int, held: Callable[[], int] | None
) -> Route[Any]:
    """Run requests from the work queue, at most `slots` stacks at once on this host."""
    inner = route.handler

    async def handler(message: Any, context: Context) -> Handled:
        run_id = message.run_id
        if (why := lease.fenced()) is not None or not lease.live():
            # Not ours to take: nak'ed, so another host's pull gets it.
            raise Fenced(f"worker host {lease.host!r} cannot take run {run_id}: {why}")
        other = await lease.take_run(context.runs, run_id)
        if other is not None:
            context.log.warning("worker.run_owned_elsewhere", run_id=run_id, owner=other.host)
            return ()
        context.log.info("worker.run_taken", run_id=run_id, host=lease.host)
        return await inner(message, context)

    consumer = dataclasses.replace(
        route.consumer, durable=WORK_DURABLE, filter_subjects=(WORK_SOURCE_SUBJECT,)
    )
    return dataclasses.replace(
        route, consumer=consumer, handler=handler, concurrency=slots, held=held
    )
