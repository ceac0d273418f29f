"""What the confined service's relays add to a request's latency.

Starts the same small HTTP app twice, directly and inside the service jail (an
`Allowlist` with one inbound port: host relay → unix socket → in-jail relay → app),
sends `--requests` GETs to each at `--rate` per second, once on fresh connections
and once over one keep-alive connection, and prints p50/p99/max per case.

    python bench/confine_relay.py [--requests 400] [--rate 20]
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from sreforge_confine import Allowlist, Bubblewrap, Jail

_APP = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        body = b"ok" * 512
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_up(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1, trust_env=False).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


def _measure(url: str, requests: int, rate: float, keepalive: bool) -> list[float]:
    took = []
    client = httpx.Client(timeout=5, trust_env=False)
    for index in range(requests):
        due = index / rate
        started = time.perf_counter()
        if keepalive:
            client.get(url)
        else:
            fresh = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1].strip("/")))
            fresh.request("GET", "/")
            fresh.getresponse().read()
            fresh.close()
        took.append((time.perf_counter() - started) * 1000)
        time.sleep(max(0.0, due + 1 / rate - (time.perf_counter() - _T0)))
    client.close()
    return took


def _report(name: str, took: list[float]) -> None:
    ordered = sorted(took)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"{name:28s} p50 {statistics.median(ordered):6.2f} ms  "
        f"p99 {p99:6.2f} ms  max {ordered[-1]:6.2f} ms"
    )


_T0 = time.perf_counter()


def main() -> None:
    """Measure direct vs jailed, fresh connections vs keep-alive."""
    global _T0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="confine-bench-"))
    direct_port, jailed_port = _free_port(), _free_port()
    prefixes = tuple(sorted({Path(sys.prefix), Path(sys.base_prefix)}))
    jail = Jail(
        (sys.executable, "-I", "-c", _APP, str(jailed_port)),
        work,
        read_only=(work, *prefixes),
        network=Allowlist(work / "net", inbound=(jailed_port,)),
    )
    confined = Bubblewrap().confine(jail)
    for folder in confined.folders:
        folder.mkdir(parents=True)
    apps = [
        subprocess.Popen([sys.executable, "-c", _APP, str(direct_port)], start_new_session=True),
        subprocess.Popen(confined.argv, cwd=work, start_new_session=True),
    ]
    try:
        for port in (direct_port, jailed_port):
            _wait_up(f"http://127.0.0.1:{port}/")
        for keepalive in (False, True):
            for name, port in (("direct", direct_port), ("jailed", jailed_port)):
                _T0 = time.perf_counter()
                took = _measure(f"http://127.0.0.1:{port}/", args.requests, args.rate, keepalive)
                _report(f"{name} {'keep-alive' if keepalive else 'new connection'}", took)
    finally:
        for app in apps:
            os.killpg(app.pid, 15)
            app.wait(timeout=20)


if __name__ == "__main__":
    main()
