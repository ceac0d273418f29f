"""`sreforge campaign` on the command line: show, and the refusals that precede any run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sreforge.campaign._spec import parse_spec
from sreforge.campaign._store import CampaignStore, Result
from sreforge.cli import main

CAMPAIGN_ID = "20261201-190000-abcdef"
SPEC = parse_spec(
    'scenarios = ["s1"]\nagents = ["ref", "noop"]\ntrials = 2\ntime_scale = 0.1', "c.toml"
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CampaignStore:
    """A campaign folder with two finished trials, where the CLI looks for campaigns."""
    monkeypatch.setenv("SREFORGE_CAMPAIGNS_DIR", str(tmp_path))
    found = CampaignStore(tmp_path, CAMPAIGN_ID)
    found.create(SPEC)
    found.append(Result("ref", "s1", 1, "run-1", "passed", 0.9, 4.0))
    found.append(Result("noop", "s1", 1, "run-2", "failed", 0.0))
    return found


def test_show_prints_the_table_and_json(
    store: CampaignStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """`campaign show ID`: the table; `--json`: the summary with its groups."""
    assert main(["campaign", "show", CAMPAIGN_ID]) == 0
    table = capsys.readouterr().out
    assert f"campaign {CAMPAIGN_ID}: 2/4 trials finished" in table
    assert "A/B ref - noop" in table
    assert main(["campaign", "show", CAMPAIGN_ID, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [g["agent"] for g in found["groups"]] == ["ref", "noop"]
    assert found["trials"]["finished"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["campaign", "resume", CAMPAIGN_ID, "--time-scale", "0.5"],
         "time_scale: campaign 20261201-190000-abcdef ran at 0.1, this resume asks for 0.5"),
        (["campaign", "resume", CAMPAIGN_ID, "--trials", "0"], "trials"),
        (["campaign", "show"], "campaign show needs a campaign ID"),
        (["campaign", "show", "20261201-000000-000000"], "no campaign 20261201-000000-000000"),
        (["campaign", "c.toml", CAMPAIGN_ID], "did you mean --resume ID?"),
    ],
)  # fmt: skip
def test_bad_requests_exit_2_naming_what_is_wrong(
    store: CampaignStore, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Each refusal happens before anything runs, exit 2, with the reason on stderr."""
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert len(store.results()) == 2
