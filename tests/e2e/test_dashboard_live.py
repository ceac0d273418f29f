"""End to end: the live dashboard in a real headless Chromium while a real run is in flight.

The run is `sreforge run latency-cache-stampede --agent reference --time-scale 0.1` on the
embedded engine, in the session's pool of whole runs. Beside it, a watcher waits for the
engine's recorder to write where its dashboard listens (`<home>/dashboard.url`: 8787, else
the free port it took, as when another run of the pool has 8787), opens the page with the
operator's token (`<home>/dashboard.token`) over the DevTools protocol and records what the
page shows as it changes: the event count, the run's phase, its verdict, its report link,
the SLI chart's samples. The test then reads that record: the stream advanced several
times before the run was recorded, the run went through grading, the verdict `passed`
(the record's) and the report link reached the page, and the browser logged nothing.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from devtools import DevTools
from headless import NO_CHROMIUM, find_chromium
from wholerun import RUN_LIMIT_S, Run, RunPool, RunSpec, WholeRuns, finished, open_pool

pytestmark = pytest.mark.integration

MIN_ADVANCES = 4
"""How often the page's event count must rise before the run is recorded: a passing run
has nine events before its record (requested … scored), most of them seconds apart."""
_POLL_S = 0.2
_STATE = """(() => {
  const row = document.querySelector('#runs tr');
  const text = (id) => document.getElementById(id).textContent;
  return {status: text('status'), events: Number(text('count')),
          run: row ? row.dataset.run : '', phase: row ? row.children[2].textContent : '',
          verdict: document.querySelector('#runs span.verdict')?.textContent || '',
          report: !!document.querySelector('#runs a.report-link'),
          sli: Number(text('sli-count')), bus: Number(text('bus-count'))};
})()"""
_STREAM = "[...document.querySelectorAll('#stream li.event')].map((li) => li.textContent)"


@dataclass(frozen=True)
class Seen:
    """The page at one moment (`at`: seconds since the watcher opened it)."""

    at: float
    status: str
    events: int
    run: str
    phase: str
    verdict: str
    report: bool
    sli: int
    bus: int

    @property
    def recorded(self) -> bool:
        """Whether the page shows the run as recorded (its record or a later event)."""
        return self.report or self.phase in {"recorded", "cleaned up"}

    def same_page(self, other: Seen) -> bool:
        """Whether `other` shows what this does (the time aside)."""
        return {**vars(self), "at": 0} == {**vars(other), "at": 0}


@dataclass
class Watch:
    """What the watcher saw of one run's dashboard."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Console messages and page errors, up to the moment the page showed the record."""
    stream: list[str] = field(default_factory=list)
    """The page's event stream when the watch ended, oldest first."""
    failure: str = ""

    def story(self) -> str:
        """The watch as lines, for failure messages."""
        lines = [f"url {self.url}", *(repr(seen) for seen in self.seen), *self.stream]
        return "\n".join([*lines, f"problems {self.problems}", f"failure {self.failure}"])


WATCHES: dict[str, Watch] = {}


def _chromium_or_why_not() -> str | None:
    """The runs skip (visibly, in their test) when there is no Chromium to watch with."""
    return None if find_chromium() else NO_CHROMIUM


def _watch_dashboard(run: Run) -> None:
    """Beside the CLI: watch the run's dashboard until the page shows its record."""
    watch = WATCHES.setdefault(run.name, Watch())
    try:
        _watch(run, watch)
    except Exception as error:  # the test reports it with what was seen
        watch.failure = f"the watcher failed: {error!r}"


def _watch(run: Run, watch: Watch) -> None:
    url_file = run.engine_home / "dashboard.url"
    deadline = time.monotonic() + RUN_LIMIT_S
    while not url_file.is_file():
        if run.exited.wait(_POLL_S) or time.monotonic() > deadline:
            watch.failure = f"no {url_file} while the run lasted"
            return
    watch.url = url_file.read_text().strip()
    token = (run.engine_home / "dashboard.token").read_text().strip()
    browser_path = find_chromium()
    assert browser_path is not None
    profile = Path(tempfile.mkdtemp(prefix="chromium-"))  # outside the run's folder
    browser = DevTools(browser_path, profile)
    try:
        browser.open(f"{watch.url}?token={token}")
        opened = time.monotonic()
        while not run.exited.is_set() and time.monotonic() < deadline:
            state: dict[str, Any] | None = browser.evaluate(_STATE)  # None: still loading
            seen = Seen(at=round(time.monotonic() - opened, 2), **state) if state else None
            if seen is not None and (not watch.seen or not seen.same_page(watch.seen[-1])):
                watch.seen.append(seen)
            if seen is not None and seen.report and seen.verdict:
                break
            run.exited.wait(_POLL_S)
        # Once the CLI has its record the engine stops and the page's streams fail to
        # reconnect (which the browser logs): what counts is what it logged until here.
        watch.problems = list(browser.problems)
        watch.stream = list(reversed(browser.evaluate(_STREAM) or []))
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


RUNS = {"watched": RunSpec("reference", beside=_watch_dashboard)}
TEST_RUNS = {"test_the_dashboard_follows_a_real_run_to_its_verdict": "watched"}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS, prepare=_chromium_or_why_not)


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The module's run, started with the session's whole runs."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(300)
def test_the_dashboard_follows_a_real_run_to_its_verdict(pool: RunPool) -> None:
    """While a reference run is in flight the dashboard's event stream advances on the
    page, the run is seen armed and in grading (its SLI chart drawn), then its verdict and
    report link appear; nothing is logged in the browser's console."""
    run, outcome, record = finished(pool, "watched")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    watch = WATCHES["watched"]
    story = watch.story()
    print(story)
    assert not watch.failure, story
    assert watch.seen, story
    in_flight = [seen for seen in watch.seen if not seen.recorded]
    counts = [seen.events for seen in in_flight if seen.status == "live"]
    assert counts == sorted(counts), f"the event count went down:\n{story}"
    advances = sum(1 for before, after in itertools.pairwise(counts) if after > before)
    assert advances >= MIN_ADVANCES, f"the stream advanced {advances} times:\n{story}"
    phases = {seen.phase for seen in in_flight}
    # The reference agent works for a fraction of a second; arming and grading take long.
    assert {"armed", "grading"} <= phases, f"phases seen: {phases}\n{story}"
    last = watch.seen[-1]
    assert last.recorded, f"the page never showed the record:\n{story}"
    assert (last.run, last.verdict) == (record["run_id"], "passed"), story
    assert last.report, story
    assert max(seen.sli for seen in watch.seen) > 0, f"no SLI drawn in grading:\n{story}"
    buses = {seen.bus for seen in in_flight}
    assert len(buses) >= MIN_ADVANCES, f"the whole-bus stream did not advance:\n{story}"
    types = [line.split()[2] for line in watch.stream]
    wanted = ["RunRequested", "StackReady", "FaultArmed", "Deployed", "Scored"]
    assert [kind for kind in types if kind in wanted] == wanted, story
    assert watch.problems == [], story
