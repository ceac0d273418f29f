"""The judge's stub upstream: answers as its handler says, over kept-alive connections."""

from __future__ import annotations

import time

import httpx
import pytest
from sreforge_deployer.judging import StubUpstream

pytestmark = pytest.mark.timeout(60)


def test_a_pooled_client_reuses_one_connection_for_every_lookup() -> None:
    """Lookups from one pooled client share a connection: on a loaded machine a fresh
    connection (and server thread) per lookup could outlast a tight lookup budget."""
    peers: list[tuple[str, int]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"isbn": request.url.path.rsplit("/", 1)[-1]})

    with StubUpstream() as stub, httpx.Client(base_url=f"http://127.0.0.1:{stub.port}") as client:
        stub.handler = answer
        for isbn in ("9780000000001", "9780000000002", "9780000000003"):
            response = client.get(f"/v1/books/{isbn}")
            assert response.json() == {"isbn": isbn}
            stream = response.extensions["network_stream"]
            peers.append(stream.get_extra_info("client_addr"))
    assert len(set(peers)) == 1, peers


def test_a_kept_connection_answers_without_waiting_for_the_clients_ack() -> None:
    """The fastest of ten lookups on a kept connection is well under the 40 ms a delayed
    ACK costs when the body waits behind the headers (Nagle): with it every lookup took
    ~44 ms, near the cut-upstream-timeout negative's 50 ms budget."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True})

    with StubUpstream() as stub, httpx.Client(base_url=f"http://127.0.0.1:{stub.port}") as client:
        stub.handler = answer
        client.get("/v1/books/1")
        took = []
        for _ in range(10):
            started = time.perf_counter()
            client.get("/v1/books/1")
            took.append(time.perf_counter() - started)
    assert min(took) < 0.025, [f"{seconds * 1000:.1f} ms" for seconds in took]


def test_a_failing_handler_answers_599_and_the_stub_keeps_serving() -> None:
    """A test's handler that raises becomes a 599 to the service, not a dropped socket."""

    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("handler bug")

    with StubUpstream() as stub, httpx.Client(base_url=f"http://127.0.0.1:{stub.port}") as client:
        stub.handler = broken
        failed = client.get("/v1/books/1")
        assert failed.status_code == 599
        assert "handler bug" in failed.text
        stub.reset()
        assert client.get("/v1/books/1").status_code == 404
