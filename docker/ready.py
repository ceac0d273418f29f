"""Healthcheck of an engine service container: ready once the bus is bootstrapped for it.

`ready.py [--port P] [DURABLE ...]` exits 0 when the NATS monitoring endpoint (its port from
SREFORGE_NATS_MONITOR_PORT) lists stream SREFORGE with every named durable consumer, and,
with `--port`, something accepts on 127.0.0.1:P (the trigger's webhook). Stdlib only: it
runs every few seconds until healthy.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request


def _durables(monitor_port: str) -> set[str] | None:
    url = f"http://127.0.0.1:{monitor_port}/jsz?streams=true&consumers=true"
    with urllib.request.urlopen(url, timeout=2) as answer:
        report = json.load(answer)
    for account in report.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == "SREFORGE":
                return {consumer["name"] for consumer in stream.get("consumer_detail") or []}
    return None


def main(argv: list[str]) -> int:
    """0 when ready, 1 when not (yet)."""
    port = None
    if argv[:1] == ["--port"]:
        port, argv = int(argv[1]), argv[2:]
    durables = _durables(os.environ.get("SREFORGE_NATS_MONITOR_PORT", "8222"))
    if durables is None or not set(argv) <= durables:
        return 1
    if port is not None:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError:
        sys.exit(1)
