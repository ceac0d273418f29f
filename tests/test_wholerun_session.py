"""The session-wide whole-run pool's own parts: its slots and the runs a module wants."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from wholerun import RunSpec, Slots, WholeRuns
from wholerun._pool import down_stacks


@pytest.mark.timeout(30)
def test_slots_hold_at_most_their_limit_and_serve_the_lower_priority_first() -> None:
    """With one slot held, waiters are served by priority, never two at once."""
    slots = Slots(1)
    order: list[int] = []
    inside = 0
    most = 0
    lock = threading.Lock()
    gate = threading.Event()

    def work(priority: int) -> None:
        nonlocal inside, most
        with slots.held(priority):
            with lock:
                inside += 1
                most = max(most, inside)
                order.append(priority)
            with lock:
                inside -= 1

    with slots.held(-1):
        threads = [threading.Thread(target=work, args=(p,)) for p in (5, 2, 9, 0)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while slots.waiting < 4 and time.monotonic() < deadline:
            gate.wait(0.01)
        assert slots.waiting == 4
    for thread in threads:
        thread.join(timeout=10)
    assert order == [0, 2, 5, 9]
    assert most == 1


@pytest.mark.timeout(30)
def test_slots_let_as_many_in_as_their_limit() -> None:
    """Two slots admit two holders at once: the second enters while the first holds."""
    slots = Slots(2)
    entered = threading.Event()
    with slots.held(0):

        def second() -> None:
            with slots.held(0):
                entered.set()

        thread = threading.Thread(target=second)
        thread.start()
        assert entered.wait(10)
    thread.join(timeout=10)


def test_a_module_wants_only_the_runs_its_selected_tests_read_in_its_order() -> None:
    """`wanted` keeps the specs' order and drops runs no selected test reads."""
    whole = WholeRuns(
        {"a": RunSpec("noop"), "b": RunSpec("reference"), "c": RunSpec("noop")},
        {"test_c": "c", "test_a": "a", "test_b": "b"},
    )
    assert whole.wanted({"test_c", "test_a", "test_other"}) == ["a", "c"]


@pytest.mark.timeout(60)
def test_taking_down_a_killed_runs_stacks_reports_what_it_cannot_remove(tmp_path: Path) -> None:
    """`down_stacks` finds nothing under a missing root, and names a run dir it could
    not account for (no state file) instead of passing it over."""
    assert down_stacks(tmp_path / "absent") == []
    (tmp_path / "run-0badc0de" / "workspace").mkdir(parents=True)
    left = down_stacks(tmp_path)
    assert any("run-0badc0de" in line for line in left), left


@pytest.mark.timeout(30)
def test_raising_the_limit_admits_a_waiting_run_at_once() -> None:
    """One slot held, one run waiting: a limit of two lets it in without the first leaving."""
    slots = Slots(1)
    entered = threading.Event()

    def second() -> None:
        with slots.held(0):
            entered.set()

    with slots.held(0):
        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.3)
        slots.set_limit(2)
        assert entered.wait(10)
    thread.join(timeout=10)


@pytest.mark.timeout(30)
def test_a_run_whose_lane_is_busy_lets_the_next_one_go_first() -> None:
    """Two slots, one `docker` run holding one: a waiting `docker` run of a lower priority
    stays out while a lane-less run behind it takes the free slot; it enters once the
    first `docker` run ends."""
    slots = Slots(2)
    entered = {"docker": threading.Event(), "local": threading.Event()}

    def wait_in(name: str, priority: int, lane: str | None) -> None:
        with slots.held(priority, lane):
            entered[name].set()

    with slots.held(0, "docker"):
        same_lane = threading.Thread(target=wait_in, args=("docker", 1, "docker"))
        same_lane.start()
        deadline = time.monotonic() + 10
        while slots.waiting < 1 and time.monotonic() < deadline:
            entered["docker"].wait(0.01)
        other = threading.Thread(target=wait_in, args=("local", 5, None))
        other.start()
        assert entered["local"].wait(10), "the lane-less run waited behind a busy lane"
        assert not entered["docker"].is_set(), "two runs of one lane held slots at once"
    assert entered["docker"].wait(10)
    for thread in (same_lane, other):
        thread.join(timeout=10)
