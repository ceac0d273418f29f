"""Local stack costs: boot time, arm → alert firing, and peak RSS of the whole stack.

Boots the real latency-cache-stampede stack (bookshelf-flask) as local processes at
`--time-scale` (default 0.1), arms it, and prints: `up()` wall time, `arm()` wall
time, arm start → primary alert firing in Prometheus, firing → page delivered to a
webhook, the peak of the summed RSS over every process of the stack (all members
of all its process groups, sampled every 100 ms from boot to `--hold` seconds after
firing) and the CPU seconds each component used until then. The measuring process
itself is not counted.

    python bench/stack_boot.py [--time-scale 0.1] [--repeat 1] [--hold 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
from sreforge_deployer.local import LocalStack
from sreforge_prom import PrometheusClient

SCENARIO = (
    Path(__file__).resolve().parents[1] / "use-cases/bookshelf/scenarios/latency-cache-stampede"
)
ALERT = "BookshelfApiLatencyP99High"


class RssSampler:
    """Samples the summed RSS of a stack's process groups in a background thread."""

    def __init__(self, stack: LocalStack) -> None:
        self.stack = stack
        self.peak_total = 0
        self.peak_by_component: dict[str, int] = {}
        self.cpu_by_pid: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            total = 0
            for name, members in self.stack.component_processes().items():
                rss = sum(_rss(proc) for proc in members)
                for proc in members:
                    self.cpu_by_pid[proc.pid] = (name, _cpu(proc, self.cpu_by_pid))
                total += rss
                self.peak_by_component[name] = max(self.peak_by_component.get(name, 0), rss)
            self.peak_total = max(self.peak_total, total)

    def cpu_by_component(self) -> dict[str, float]:
        """CPU seconds (user + system) each component used, over all its processes."""
        totals: dict[str, float] = {}
        for name, seconds in self.cpu_by_pid.values():
            totals[name] = totals.get(name, 0.0) + seconds
        return totals


def _cpu(proc: psutil.Process, seen: dict[int, tuple[str, float]]) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return seen.get(proc.pid, ("", 0.0))[1]
    return float(times.user + times.system)


def _rss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


class PageCounter:
    """A webhook receiver that timestamps the first firing page for ALERT."""

    def __init__(self) -> None:
        self.first_page: float | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if outer.first_page is None and ALERT.encode() in body and b"firing" in body:
                    outer.first_page = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _wait(probe: Callable[[], bool], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"not within {timeout}s")


def _firing(prometheus_url: str) -> bool:
    with PrometheusClient(prometheus_url, timeout_seconds=5) as prometheus:
        alerts = prometheus.alerts()
    return any(alert.name == ALERT and alert.state == "firing" for alert in alerts)


def measure_once(time_scale: float, hold: float) -> dict[str, float]:
    """One boot → arm → firing cycle; returns its figures (seconds, MiB)."""
    pages = PageCounter()
    stack = LocalStack(SCENARIO, time_scale=time_scale, webhook_url=pages.url)
    try:
        with RssSampler(stack) as rss:
            started = time.monotonic()
            stack.up()
            booted = time.monotonic()
            stack.arm()
            armed = time.monotonic()
            confirm = stack.setup.confirm_fire_seconds * time_scale
            firing = _wait(lambda: _firing(stack.url("prometheus")), confirm + 5)
            _wait(lambda: pages.first_page is not None, confirm)
            time.sleep(hold)  # keep sampling RSS while the incident runs
    finally:
        stack.down()
        pages.server.shutdown()
    assert pages.first_page is not None
    figures = {
        "boot_s": booted - started,
        "arm_call_s": armed - booted,
        "arm_to_firing_s": firing - booted,
        "firing_to_page_s": pages.first_page - firing,
        "peak_rss_mib": rss.peak_total / 2**20,
    }
    for name, peak in sorted(rss.peak_by_component.items()):
        figures[f"rss_{name}_mib"] = peak / 2**20
    for name, seconds in sorted(rss.cpu_by_component().items()):
        figures[f"cpu_{name}_s"] = seconds
    return figures


def main() -> int:
    """Run the benchmark and print one line per figure (median over repeats)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--hold", type=float, default=10.0, help="seconds to sample after firing")
    args = parser.parse_args()
    runs = [measure_once(args.time_scale, args.hold) for _ in range(args.repeat)]
    print(f"latency-cache-stampede, time_scale {args.time_scale:g}, {args.repeat} run(s)")
    for key in runs[0]:
        values = [run[key] for run in runs]
        spread = f"  (min {min(values):.2f}, max {max(values):.2f})" if len(values) > 1 else ""
        print(f"  {key:28} {statistics.median(values):8.2f}{spread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
