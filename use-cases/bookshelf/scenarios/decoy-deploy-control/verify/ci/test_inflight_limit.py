"""Hidden CI: a positive in-flight limit still protects the service.

Hidden from the workspace: the CI gate's judge runs these in a process of its own against
the submitted service, started for each test (`serve`) with the environment given, over
HTTP; the metadata service it reaches is the judge's stub (`upstream`).
"""

from __future__ import annotations

import threading

import httpx
from sreforge_deployer.judging import Serve, StubUpstream

LIMIT = "BOOKSHELF_MAX_INFLIGHT_REQUESTS"
# The held searches wait on the stub, never on the service's own upstream timeout.
PATIENT = {"BOOKSHELF_UPSTREAM_TIMEOUT_SECONDS": "60"}


def test_a_positive_limit_still_refuses_the_excess(serve: Serve, upstream: StubUpstream) -> None:
    """With 3 searches held in flight (their metadata lookups held) and a limit of 3, the
    next search is refused; health still answers; once released, searches answer."""
    release, entered = threading.Event(), threading.Semaphore(0)

    def held(request: httpx.Request) -> httpx.Response:
        entered.release()
        release.wait(30)
        return httpx.Response(404, json={"error": "unknown"})

    upstream.handler = held
    client = serve({LIMIT: "3", **PATIENT})
    queries = ["dune", "foundation", "hyperion"]  # distinct: no hit is cached yet
    threads = [
        threading.Thread(target=client.get, args=("/search",), kwargs={"params": {"q": q}})
        for q in queries
    ]
    for thread in threads:
        thread.start()
    try:
        for _ in threads:
            assert entered.acquire(timeout=20)
        refused = client.get("/search", params={"q": "neuromancer"})
        assert refused.status_code in (429, 503)
        assert client.get("/healthz").status_code == 200
    finally:
        release.set()
        for thread in threads:
            thread.join(30)
    assert client.get("/search", params={"q": "dune"}).status_code == 200


def test_the_limit_is_read_from_the_environment(serve: Serve) -> None:
    """The operator's knob still works for ordinary values; nonsense is refused at start."""
    assert serve({LIMIT: "48"}).get("/search", params={"q": "dune"}).status_code == 200
    for bad in ("-1", "lots"):
        assert serve.refuses({LIMIT: bad}), f"{LIMIT}={bad} was accepted"
