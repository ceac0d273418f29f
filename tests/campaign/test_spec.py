"""The campaign file: what it accepts, what flags override, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sreforge.campaign._errors import CampaignError
from sreforge.campaign._spec import CampaignSpec, load_spec, parse_spec

GOOD = """
scenarios = ["latency-cache-stampede"]
agents = ["reference", "noop"]
trials = 5
time_scale = 0.1
concurrency = 5
"""


def test_a_good_file_parses_with_defaults_for_what_it_omits() -> None:
    """Every field the file gives, and the defaults (local topology, k = trials)."""
    spec = parse_spec(GOOD, "c.toml")
    assert spec.scenarios == ("latency-cache-stampede",)
    assert spec.agents == ("reference", "noop")
    assert (spec.trials, spec.time_scale, spec.concurrency) == (5, 0.1, 5)
    assert spec.topology == "local"
    assert spec.pass_k == 5


def test_flags_override_the_file_and_none_means_not_given() -> None:
    """A flag's value wins; a flag left unset (None) keeps the file's."""
    spec = parse_spec(GOOD, "c.toml", {"trials": 2, "concurrency": None, "agents": ["noop"]})
    assert spec.trials == 2
    assert spec.concurrency == 5
    assert spec.agents == ("noop",)


def test_the_spec_copy_round_trips_through_toml() -> None:
    """`campaign.toml` (what resume reads) parses back to the same spec."""
    spec = parse_spec(GOOD + 'topology = "compose"\nk = 3\n', "c.toml")
    assert parse_spec(spec.to_toml(), "copy") == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trials = 0", "trials: Input should be greater than or equal to 1"),
        ("time_scale = 1.5", "time_scale: Input should be less than or equal to 1"),
        ("concurrency = 'many'", "concurrency: Input should be a valid integer"),
        ('topology = "k8s"', "topology: Input should be 'local' or 'compose'"),
        ("agent = ['noop']", "agent: unknown field (expected: scenarios, agents,"),
        ("k = 9", "k: 9 is more than trials (5)"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(text: str, message: str) -> None:
    """Each bad field is named in the error, with the file's name."""
    lines = [line for line in GOOD.splitlines() if not line.startswith(text.split()[0] + " ")]
    with pytest.raises(CampaignError) as caught:
        parse_spec("\n".join([*lines, text]), "bad.toml")
    assert str(caught.value).startswith("bad.toml: ")
    assert message in str(caught.value)


def test_missing_lists_and_bad_ids_are_named() -> None:
    """No agents: the field is named; a scenario id with a slash or a repeated agent too."""
    with pytest.raises(CampaignError, match="agents: Field required"):
        parse_spec('scenarios = ["s"]', "c.toml")
    with pytest.raises(CampaignError, match=r"scenarios: '\.\./etc' is not a scenario id"):
        parse_spec('scenarios = ["../etc"]\nagents = ["noop"]', "c.toml")
    with pytest.raises(CampaignError, match=r"agents: listed twice: \['noop'\]"):
        parse_spec('scenarios = ["s"]\nagents = ["noop", "noop"]', "c.toml")


def test_not_toml_and_no_file_are_clear_errors(tmp_path: Path) -> None:
    """A syntax error says where; a missing file says it cannot be read."""
    with pytest.raises(CampaignError, match=r"c.toml: not valid TOML: .*line 2"):
        parse_spec('scenarios = ["s"]\nagents = = 1', "c.toml")
    with pytest.raises(CampaignError, match=r"cannot read campaign file .*nothing\.toml"):
        load_spec(tmp_path / "nothing.toml")


def test_the_model_refuses_building_one_with_a_misspelt_field() -> None:
    """Extra fields are refused in code too (the file's spelling is the contract)."""
    with pytest.raises(ValueError, match="trails"):
        CampaignSpec.model_validate({"scenarios": ["s"], "agents": ["a"], "trails": 3})
