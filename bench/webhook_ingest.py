"""Webhook ingestion throughput: alerts/s through the real receiver and a real nats-server.

Starts the pinned nats-server, bootstraps the bus, runs the trigger service (uvicorn on
loopback) in a child process, as in the engine, and posts `--alerts` distinct alerts
as Alertmanager would (`--group` alerts per notification, `--concurrency` requests in
flight) from this process. Prints alerts/s and how many alerts did not reach the
stream (target: >= 1,000 alerts/s, zero lost; SPEC section 11).

    python bench/webhook_ingest.py [--alerts 5000] [--group 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from asyncio.subprocess import PIPE
from typing import Any

import httpx
import psutil
import structlog
from sreforge_bus import STREAM, Bus, bootstrap, connect
from sreforge_bus.embedded import start_nats_server

TARGET_RATE = 1000.0
TOKEN = "bench-token"
ROUTE = "bench"


def notification(first: int, size: int) -> bytes:
    """One version-4 webhook body carrying alerts `first` .. `first + size - 1`."""
    alerts: list[dict[str, Any]] = [
        {
            "status": "firing",
            "labels": {"alertname": "BenchAlert", "severity": "page", "instance": f"i{n}"},
            "annotations": {"summary": "benchmark"},
            "startsAt": "2026-11-29T07:00:00.000000001Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://127.0.0.1:9090/graph",
            "fingerprint": f"{n:016x}",
        }
        for n in range(first, first + size)
    ]
    body = {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="BenchAlert",batch="{first}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "pager",
        "groupLabels": {"alertname": "BenchAlert"},
        "commonLabels": {"alertname": "BenchAlert"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": alerts,
    }
    return json.dumps(body).encode()


async def serve(nats_url: str) -> None:
    """Child process: run the trigger service on a free port and print its URL."""
    from sreforge_trigger import TriggerService, TriggerSettings

    bus = await connect(nats_url, name="bench-trigger")
    service = TriggerService(settings=TriggerSettings.model_validate({"token": TOKEN, "port": 0}))
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    print(await service.listening.wait(), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until parent closes
    stop.set()
    await task
    await bus.close()


async def post_all(url: str, alerts: int, group: int, concurrency: int) -> tuple[float, int]:
    """Post every notification; return elapsed seconds and the number of non-200 answers.

    Each sender has its own keep-alive client (as each Alertmanager does): one shared
    httpx pool serialises on its lock and would measure httpx, not the receiver.
    """
    bodies = [notification(first, min(group, alerts - first)) for first in range(0, alerts, group)]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    statuses: list[int] = []

    async def sender(share: list[bytes]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            for body in share:
                path = f"/v1/alertmanager/{ROUTE}"
                statuses.append(
                    (await client.post(path, content=body, headers=headers)).status_code
                )

    start = time.perf_counter()
    await asyncio.gather(*(sender(bodies[k::concurrency]) for k in range(concurrency)))
    return time.perf_counter() - start, sum(status != 200 for status in statuses)


async def stored(bus: Bus) -> int:
    """How many TriggerFired events the stream holds."""
    info = await bus.js.stream_info(STREAM, subjects_filter="sreforge.trigger.fired")
    return int((info.state.subjects or {}).get("sreforge.trigger.fired", 0))


async def bench(alerts: int, group: int, concurrency: int) -> int:
    """Run one measurement; return the process exit code (0 when the target is met)."""
    with start_nats_server() as server:
        bus = await connect(server.url, name="bench")
        await bootstrap(bus)
        child = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--serve", server.url, stdin=PIPE, stdout=PIPE
        )
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            url = (await asyncio.wait_for(child.stdout.readline(), 30)).decode().strip()
            server_cpu, client_cpu = _cpu(psutil.Process(child.pid)), _cpu(psutil.Process())
            elapsed, failed = await post_all(url, alerts, group, concurrency)
            server_cpu = _cpu(psutil.Process(child.pid)) - server_cpu
            client_cpu = _cpu(psutil.Process()) - client_cpu
            lost = alerts - await stored(bus)
        finally:
            child.stdin.close()
            try:
                await asyncio.wait_for(child.wait(), 15)
            except TimeoutError:
                child.kill()
                await child.wait()
            await bus.close()
    rate = alerts / elapsed
    print(
        f"webhook ingest: {alerts} alerts in {len(range(0, alerts, group))} notifications "
        f"of {group}, {concurrency} in flight: {elapsed:.2f} s, {rate:,.0f} alerts/s, "
        f"{failed} non-200, {lost} lost (target >= {TARGET_RATE:,.0f} alerts/s, 0 lost)\n"
        f"  CPU: receiver {server_cpu:.2f} s ({server_cpu / alerts * 1e3:.2f} ms/alert, "
        f"{server_cpu / len(range(0, alerts, group)) * 1e3:.2f} ms/request), "
        f"client {client_cpu:.2f} s; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    return 0 if rate >= TARGET_RATE and lost == 0 and failed == 0 else 1


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main() -> int:
    """Parse arguments and run the benchmark (or, with `--serve`, the child service)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--alerts", type=int, default=5000)
    parser.add_argument("--group", type=int, default=10, help="alerts per notification")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--serve", metavar="NATS_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.serve:
        asyncio.run(serve(args.serve))
        return 0
    return asyncio.run(bench(args.alerts, args.group, args.concurrency))


if __name__ == "__main__":
    sys.exit(main())
