"""Worker hosts: the services that touch a run's stack, pinned to the host that owns it.

`sreforge serve --worker HOST` runs the services as worker host HOST on a shared NATS.
The deployer's RunRequested route becomes the work queue's (`workers-runs` on stream
`SREFORGE_WORK`, one durable every host pulls from, only while the host has a free stack
slot); a host takes a run by creating its owner key (`deployer.owner.<run>`) under its
lease (`deployer.host.<host>`, kept by the deployer). The host pulls a run only while
`Admission` (the campaign's rule, `sreforge._admission`) admits one more: it knows the
phase of each run it holds from its deployer's handlers, and reads the machine's memory
and CPU pressure at every pull. Every other route of a pinned
service (context, runner, deployer, oracle: they reach the stack's loopback endpoints or
its processes) reads the host's own durable (`<durable>-<host>`) and acts only on runs
this host's current lease owns. The correlator, trigger and recorder stay as they are:
any host's copy may handle any run (the trigger gets the webhooks of its own host's
stacks). The embedded default (`sreforge up`, `sreforge run`) uses none of this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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

from sreforge._admission import MEASURED_COSTS, Admission, MachineNow, Phase
from sreforge._machine import machine_now
from sreforge._settings import EngineSettings

__all__ = [
    "PINNED_SERVICES",
    "WORK_ROUTE",
    "HostAdmission",
    "RunPhases",
    "pinned_durables",
    "worker_admission",
    "worker_services",
]

log = structlog.get_logger("sreforge.workers")

PINNED_SERVICES = ("context", "runner", "deployer", "oracle")
"""The services that act on a run's stack, so only on the host that owns it."""
WORK_ROUTE = ("deployer", "deployer-stack")
"""The route run requests take: in worker mode, from the work queue instead."""


class _Marks(NamedTuple):
    during: Phase | None  # None: the phase stays what it was
    after: Phase | None  # None: the run is over on this host


_PHASE_MARKS = {
    "deployer-stack": _Marks("boot", "incident"),
    "deployer-submitted": _Marks("ci", "grading"),  # CI, the merge and the redeploy
    "deployer-scored": _Marks(None, "teardown"),
    "deployer-cleanup": _Marks(None, None),
}
"""What each deployer route says of a run's phase, while it runs and once it returned."""


class RunPhases:
    """The phase of each run this host holds, as its deployer's handlers saw it."""

    def __init__(self) -> None:
        self._phases: dict[str, Phase] = {}

    def enter(self, run_id: str, phase: Phase | None) -> None:
        """`run_id` is in `phase` now (None: its last event on this host was handled)."""
        if phase is None:
            self._phases.pop(run_id, None)
        else:
            self._phases[run_id] = phase

    def now(self) -> list[Phase]:
        """The phases of the runs held, one per run."""
        return list(self._phases.values())


@dataclasses.dataclass(frozen=True)
class HostAdmission:
    """A worker host's admission: the rule, and where it reads the machine."""

    admission: Admission
    machine: Callable[[], MachineNow] = machine_now


def worker_admission(settings: EngineSettings) -> HostAdmission:
    """The admission `sreforge serve --worker` runs under (`SREFORGE_WORKER_*`)."""
    admission = Admission(
        settings.worker_slots,
        settings.worker_stack_memory_mb,
        settings.worker_reserve_memory_mb,
        MEASURED_COSTS,
        settings.worker_cpu_budget if settings.worker_admit_by_cpu else None,
        settings.worker_max_cpu_pressure,
    )
    return HostAdmission(admission)


def pinned_durables(service: Service, host: str) -> list[str]:
    """The durables `service` reads as worker host `host` (for the bus permissions)."""
    if service.name not in PINNED_SERVICES:
        return [route.consumer.durable for route in service.routes]
    return [
        WORK_DURABLE if _is_work(service, route) else host_durable(route.consumer.durable, host)
        for route in service.routes
    ]


def worker_services(
    services: Sequence[Service],
    lease: HostLease,
    slots: int,
    admission: HostAdmission | None = None,
) -> list[Service]:
    """`services` as worker host `lease.host` runs them (see the module docstring); without
    `admission` the host pulls whenever it has a free slot."""
    return [_as_worker(service, lease, slots, admission) for service in services]


def _is_work(service: Service, route: Route[Any]) -> bool:
    return (service.name, route.consumer.durable) == WORK_ROUTE


def _as_worker(
    service: Service, lease: HostLease, slots: int, admission: HostAdmission | None
) -> Service:
    if service.name not in PINNED_SERVICES:
        return service
    held = getattr(getattr(service, "deployer", None), "held", None)
    phases = RunPhases()
    if admission is not None and service.name == WORK_ROUTE[0]:
        held = _admitted(held, slots, phases, admission)
        service = dataclasses.replace(
            service, routes=tuple(_marking(route, phases) for route in service.routes)
        )
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


def _marking(route: Route[Any], phases: RunPhases) -> Route[Any]:
    """The deployer's route, noting in `phases` the phase each run it handles is in."""
    marks = _PHASE_MARKS.get(route.consumer.durable)
    if marks is None:
        return route
    inner = route.handler

    async def handler(message: Any, context: Context) -> Handled:
        run_id = message.run_id
        if marks.during is not None:
            phases.enter(run_id, marks.during)
        handled = await inner(message, context)
        phases.enter(run_id, marks.after)
        return handled

    return dataclasses.replace(route, handler=handler)


def _admitted(
    held: Callable[[], int] | None, slots: int, phases: RunPhases, admission: HostAdmission
) -> Callable[[], int]:
    """The work route's used slots as its pull sees them: all of them while admission says
    no (within `slots` and what the cores carry); else all but one, so the pull asks for
    one run at a time and admission sees each run's boot before it admits the next."""
    last = ""

    def used() -> int:
        nonlocal last
        stacks = held() if held is not None else 0
        machine = admission.machine()
        cap = min(slots, admission.admission.on_cores(machine.cores))
        decision = admission.admission.admit(phases.now(), cap, machine)
        if decision.why != last:
            last = decision.why
            log.info("worker.admission", admit=decision.admit, why=decision.why)
        return max(stacks, slots - 1 if decision.admit else slots)

    return used
