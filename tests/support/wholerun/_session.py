"""One pool of whole runs for the whole pytest session, as a user's campaign runs them.

A module of whole-run tests declares `WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS, …)`. When
collection ends, the root `conftest.py` moves those tests behind every other test and
starts the runs they select, all modules' runs behind one set of slots, queued in the
order their tests will ask. While the ordinary tests run, `SREFORGE_E2E_BACKGROUND` runs
go at once (default 2; 1 where a starved run or timing test would fail for the machine's
sake); once the whole-run tests begin, `SREFORGE_E2E_PARALLEL` (default 3: nothing
else runs by then). So the ordinary tests run in the foreground while whole runs work in
the background, and a whole-run test finds its run finished, or nearly. A module whose
tests need a fixture first (the Docker engine's image inputs) starts its runs in a
thread after `prepare`. Without the plugin (e.g. a module imported elsewhere),
`open_pool` starts the module's runs when its fixture asks, behind the same slots.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ._pool import RunPool, RunSpec, Slots

__all__ = [
    "WholeRuns",
    "close_session",
    "entering",
    "live_pids",
    "open_pool",
    "ordered",
    "start_runs",
]


@dataclass(frozen=True, eq=False)
class WholeRuns:
    """A module's whole runs: every run it may need, and which run each test reads."""

    specs: Mapping[str, RunSpec]
    test_runs: Mapping[str, str]
    """Test function name → run name."""
    scripts_dir: Path | None = None
    """Where the module's `scripted:<name>` agents are found."""
    prepare: Callable[[], str | None] | None = None
    """Readies what the runs need before they start (in a thread); a text is why they skip."""

    def wanted(self, selected: set[str]) -> list[str]:
        """The runs the `selected` tests read, in the order of `specs`."""
        names = {run for test, run in self.test_runs.items() if test in selected}
        return [name for name in self.specs if name in names]


@dataclass
class _Planned:
    whole: WholeRuns
    names: list[str]
    priority: dict[str, int]
    pool: RunPool | None = None
    skipped: str | None = None
    failed: str | None = None
    started: threading.Event | None = None


class _Session:
    """The session's slots, its runs' root folder and each module's pool."""

    def __init__(self) -> None:
        self.parallel = max(1, int(os.environ.get("SREFORGE_E2E_PARALLEL", "3")))
        self.background = max(1, int(os.environ.get("SREFORGE_E2E_BACKGROUND", "2")))
        self.slots = Slots(min(self.background, self.parallel))
        self.base = Path(tempfile.mkdtemp(prefix="runs-"))
        self.planned: dict[int, _Planned] = {}
        self.pools: list[RunPool] = []
        self._lock = threading.Lock()

    def start(self, key: str, plan: _Planned) -> None:
        """Start `plan`'s runs now (after its `prepare`, which may skip them)."""
        if plan.whole.prepare is not None:
            plan.skipped = plan.whole.prepare()
            if plan.skipped is not None:
                return
        chosen = {name: plan.whole.specs[name] for name in plan.names}
        pool = RunPool(
            self.base / key,
            self.slots,
            chosen,
            scripts_dir=plan.whole.scripts_dir,
            priority=plan.priority,
        )
        with self._lock:
            self.pools.append(pool)
        plan.pool = pool


_SESSION: _Session | None = None


def _session() -> _Session:
    global _SESSION
    if _SESSION is None:
        _SESSION = _Session()
    return _SESSION


def ordered(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` with the whole-run tests moved behind every other test, in their order."""
    ordinary = [item for item in items if _whole_runs(item) is None]
    return [*ordinary, *(item for item in items if _whole_runs(item) is not None)]


def start_runs(items: Sequence[pytest.Item]) -> None:
    """Start the runs the whole-run tests among `items` read, in one set of slots.

    A run is queued by the position of the first test that reads it, so the slots work
    through the runs in the order the tests will ask for them.
    """
    session = _session()
    plans: dict[int, tuple[str, _Planned]] = {}
    for position, item in enumerate(items):
        whole = _whole_runs(item)
        if whole is None:
            continue
        module = getattr(item, "module", None)
        key = module.__name__.rsplit(".", 1)[-1] if module is not None else item.name
        _, plan = plans.setdefault(id(whole), (key, _Planned(whole, [], {})))
        run = whole.test_runs.get(item.name)
        if run is not None and run not in plan.priority:
            plan.priority[run] = position
    for key, plan in plans.values():
        plan.names = [name for name in plan.whole.specs if name in plan.priority]
        session.planned[id(plan.whole)] = plan
        if plan.whole.prepare is None:
            session.start(key, plan)
        else:
            plan.started = threading.Event()
            threading.Thread(target=_start_later, args=(session, key, plan), daemon=True).start()


def _start_later(session: _Session, key: str, plan: _Planned) -> None:
    try:
        session.start(key, plan)
    except Exception as error:  # the module's tests fail with it, not the session
        plan.failed = f"the module's runs could not start: {error!r}"
    finally:
        assert plan.started is not None
        plan.started.set()


def _whole_runs(item: pytest.Item) -> WholeRuns | None:
    module = getattr(item, "module", None)
    found = getattr(module, "WHOLE_RUNS", None)
    return found if isinstance(found, WholeRuns) else None


@contextlib.contextmanager
def open_pool(request: pytest.FixtureRequest, whole: WholeRuns) -> Iterator[RunPool]:
    """The module's pool: the one the session started, or one started now for the
    selected tests' runs; its runs are killed and its folder removed afterwards."""
    session = _session()
    plan = session.planned.get(id(whole))
    if plan is None:
        selected = {item.name for item in request.session.items}
        names = whole.wanted(selected)
        plan = _Planned(whole, names, {name: -1 for name in names})
        session.planned[id(whole)] = plan
        session.start(request.module.__name__.rsplit(".", 1)[-1], plan)
    if plan.started is not None:
        plan.started.wait()
    if plan.failed is not None:
        pytest.fail(plan.failed)
    if plan.skipped is not None:
        pytest.skip(plan.skipped)
    assert plan.pool is not None, "the module's runs were never started"
    try:
        yield plan.pool
    finally:
        plan.pool.close()
        shutil.rmtree(plan.pool.base, ignore_errors=True)


def entering(item: pytest.Item) -> None:
    """Called before each test: once the whole-run tests begin (the ordinary ones are
    done), let `SREFORGE_E2E_PARALLEL` runs at once instead of `SREFORGE_E2E_BACKGROUND`."""
    if _SESSION is not None and _whole_runs(item) is not None:
        _SESSION.slots.set_limit(_SESSION.parallel)


def live_pids() -> set[int]:
    """The CLI pids of every run of the session still going."""
    pools = _session().pools if _SESSION is not None else []
    return {pid for pool in pools for pid in pool.live_pids()}


def close_session() -> None:
    """Kill every run still going and remove the session's runs folder."""
    if _SESSION is None:
        return
    for pool in _SESSION.pools:
        pool.close()
    shutil.rmtree(_SESSION.base, ignore_errors=True)
