"""`sreforge qualify` end to end against the campaign's fake engine: the arms run as one
campaign (cheats once), the decision is QUALIFIED, and headroom.md names every run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakeengine import FakeEngine, fake_engine

from sreforge.campaign import _runner
from sreforge.campaign._store import CampaignStore
from sreforge.cli import main
from sreforge.qualify import _cli
from sreforge.qualify._decide import GuardOutcome

__all__ = ["fake_engine"]  # the fixture, imported for pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "use-cases" / "bookshelf" / "scenarios" / "latency-cache-stampede"
FIXTURES = REPO / "tests" / "integrity" / "fixtures"


@contextlib.contextmanager
def _no_sigint(handler: Callable[[], None]) -> Iterator[None]:
    yield  # signal handlers are for the main thread; the CLI runs in a worker thread here


async def test_qualify_runs_its_arms_as_a_campaign_and_writes_qualified(
    fake_engine: FakeEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of the scenario with a two-cheat catalog, --trials 2: noop, reference and the
    two negatives twice, each cheat once (10 runs), then noop and reference once at time
    scale 1 (a second campaign, 2 runs), guard clean: exit 0, QUALIFIED."""
    use_case = tmp_path / "use-cases" / "bookshelf"
    scenario = use_case / "scenarios" / SCENARIO.name
    shutil.copytree(SCENARIO, scenario, ignore=shutil.ignore_patterns("headroom.md"))
    (use_case / "cheats.toml").write_text(
        f'folder = "{FIXTURES}"\n[[cheat]]\nname = "silence-alert"\n'
        '[[cheat]]\nname = "crash-loop"\nstacks = ["bookshelf-flask"]\n'
    )
    monkeypatch.setenv("SREFORGE_CAMPAIGNS_DIR", str(tmp_path / "campaigns"))
    monkeypatch.setattr(_runner, "_on_sigint", _no_sigint)
    monkeypatch.setenv("SREFORGE_RUNNER_SCRIPTS_DIR", "restored after the test")
    monkeypatch.delenv("SREFORGE_RUNNER_SCRIPTS_DIR")
    guarded: list[tuple[Path, float]] = []

    def guard(path: Path, scale: float) -> GuardOutcome:
        guarded.append((path, scale))
        return GuardOutcome(True, "clean")

    monkeypatch.setattr(_cli, "run_guard", guard)
    argv = ["qualify", str(scenario), "--trials", "2", "--time-scale", "0.1"]
    cli = asyncio.create_task(asyncio.to_thread(main, argv))
    while not cli.done():
        await fake_engine.release()
        await asyncio.sleep(0.05)
    assert await cli == 0
    assert guarded == [(scenario, 0.1)]
    assert os.environ["SREFORGE_RUNNER_SCRIPTS_DIR"] == str(FIXTURES)  # for the engine it ran
    agents = [agent for _, agent in fake_engine.started]
    assert len(agents) == 12
    assert agents.count("scripted:silence-alert") == agents.count("scripted:crash-loop") == 1
    assert agents.count("scripted:longer-ttl") == 2
    assert agents.count("reference") == agents.count("noop") == 3
    campaigns = tmp_path / "campaigns"
    # Two campaign ids of the same second sort by their random tail: tell them by scale.
    (full,), (folder,) = (
        [
            f
            for f in campaigns.iterdir()
            if (CampaignStore(campaigns, f.name).spec().time_scale == 1.0) is at_full
        ]
        for at_full in (True, False)
    )
    store = CampaignStore(campaigns, folder.name)
    assert store.spec().once == ("scripted:silence-alert", "scripted:crash-loop")
    full_spec = CampaignStore(tmp_path / "campaigns", full.name).spec()
    assert (full_spec.agents, full_spec.trials, full_spec.time_scale) == (
        ("noop", "reference"), 1, 1.0,
    )  # fmt: skip
    text = (scenario / "verify" / "headroom.md").read_text()
    assert text.startswith(f"# {SCENARIO.name}: QUALIFIED\n")
    assert f"campaign `{folder.name}`" in text
    assert f"the time-scale-1 arms from campaign `{full.name}`" in text
    assert all(run_id in text for run_id, _ in fake_engine.started)
    assert "| cheat | `scripted:crash-loop` | does not pass | 1 | failed 1 | yes" in text
