"""loadgen under starvation: its control server answers without the generator's loop, the
in-flight cap sheds instead of queueing, and SIGTERM ends it with requests in flight."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

import httpx
import pytest

from .conftest import Component, Launcher, start_loadgen


def _never_answers() -> httpx.MockTransport:
    """A target that holds every request until the client gives up."""

    async def hold(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return httpx.MockTransport(hold)


def _ok() -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, json={}))


def _value(registry: Any, name: str, labels: dict[str, str] | None = None) -> float:
    value = registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else float(value)


@pytest.mark.timeout(30)
async def test_a_blocked_generator_loop_still_answers_metrics_healthz_and_status(
    loadgen: ModuleType,
) -> None:
    """The loop is blocked outright (a starved host lags it by seconds): the scrape is
    served by the control server's own thread within its 2 s timeout all the same."""
    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 20, loadgen.profile_named("listing-mix"), transport=_ok()
    )
    control = loadgen.ControlServer(generator, asyncio.get_running_loop(), "127.0.0.1", 0)
    control.start()
    answers: dict[str, httpx.Response] = {}
    answered = threading.Event()

    def scrape() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{control.port}", timeout=2.0) as client:
            for path in ("/metrics", "/healthz", "/status"):
                answers[path] = client.get(path)
        answered.set()

    scraper = threading.Thread(target=scrape)
    scraper.start()
    blocked = answered.wait(timeout=10)  # blocks this loop: nothing on it can run meanwhile
    scraper.join()
    control.close()
    await generator.stop()
    assert blocked, "the scrape did not finish while the loop was blocked"
    assert answers["/metrics"].status_code == 200
    assert "loadgen_target_rps 20.0" in answers["/metrics"].text
    assert answers["/healthz"].json() == {"status": "ok"}
    assert answers["/status"].json()["target_rps"] == 20


@pytest.mark.timeout(30)
async def test_pause_resume_and_warmup_are_done_on_the_generators_loop(
    loadgen: ModuleType,
) -> None:
    """The control threads hop onto the loop for what changes the generator, and answer
    with the state it left."""
    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 20, loadgen.profile_named("listing-mix"), paused=True,
        transport=_ok(),
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    control = loadgen.ControlServer(generator, loop, "127.0.0.1", 0)
    control.start()
    on_loop: list[bool] = []
    pause = generator.pause

    def watched_pause() -> None:
        on_loop.append(threading.current_thread() is threading.main_thread())
        pause()

    generator.pause = watched_pause
    base = f"http://127.0.0.1:{control.port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            resumed = (await client.post("/resume")).json()
            paused = (await client.post("/pause")).json()
            warmup = (await client.post("/warmup")).json()
            missing = await client.post("/nowhere")
        left_paused = generator.paused
    finally:
        control.close()
        await generator.stop()
    assert resumed["paused"] is False
    assert paused["paused"] is True
    assert left_paused
    assert on_loop == [True], "pause ran off the generator's loop"
    assert warmup == {"requests": 0, "ok": 0, "seconds": warmup["seconds"]}
    assert missing.status_code == 404


@pytest.mark.timeout(30)
async def test_arrivals_over_the_in_flight_cap_are_shed_not_queued(loadgen: ModuleType) -> None:
    """A target that never answers fills the cap; every later arrival is shed: counted as
    a failed answer and in loadgen_shed_total, not issued, never sent, never queued."""
    generator = loadgen.LoadGenerator(
        "http://bookshelf.test", 100, loadgen.profile_named("listing-mix"), max_inflight=3,
        transport=_never_answers(),
    )  # fmt: skip
    registry = generator.metrics.registry
    arrivals = asyncio.create_task(generator.run())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while _value(registry, "loadgen_shed_total") < 80:
        assert loop.time() < deadline, "nothing was shed"
        await asyncio.sleep(0.02)
    inflight = _value(registry, "loadgen_inflight")
    achieved = _value(registry, "loadgen_achieved_rps")
    shed = _value(registry, "loadgen_shed_total")
    failed = _value(registry, "loadgen_responses_checked_total", {"result": "failed"})
    await generator.stop(grace_seconds=1)
    arrivals.cancel()
    assert inflight == 3
    assert failed == shed, "a shed arrival is a failed answer"
    assert achieved < 10, "shed arrivals are not issued: the achieved rate shows the shortfall"
    assert _value(registry, "loadgen_requests_total", {"status": "error"}) == 0
    assert registry.get_sample_value("loadgen_ok_ratio") == 0.0


def test_the_default_cap_is_above_what_a_punctual_client_holds(loadgen: ModuleType) -> None:
    """At the scenario's 20 rps and 10 s timeout at most 200 are in flight on time."""
    assert loadgen.default_max_inflight(20, 10) == 250
    assert loadgen.default_max_inflight(1, 1) == 16


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A target that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for sock in (*held, listener):
            sock.close()


@dataclass
class _Target:
    """Where a component under test sends its requests (what `start_loadgen` reads)."""

    url: str


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_sigterm_ends_it_promptly_with_requests_in_flight(
    launch: Launcher, black_hole: str
) -> None:
    """Requests held by a target that never answers do not keep the process alive: it exits
    0 within a few seconds of SIGTERM (leaked generators were seen outliving one for 40 min)."""
    target = cast(Component, _Target(black_hole))
    load = start_loadgen(launch, target, 50, "--profile", "listing-mix", "--timeout-seconds", "30")
    deadline = time.monotonic() + 20
    while True:
        text = httpx.get(f"{load.url}/metrics", timeout=5).text
        inflight = next(float(line.split()[1]) for line in text.splitlines()
                        if line.startswith("loadgen_inflight "))  # fmt: skip
        if inflight >= 20:
            break
        assert time.monotonic() < deadline, f"only {inflight} in flight"
        time.sleep(0.1)
    started = time.monotonic()
    os.killpg(load.process.pid, signal.SIGTERM)
    code = load.process.wait(timeout=20)
    elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed < 6, f"exit took {elapsed:.1f}s after SIGTERM"
