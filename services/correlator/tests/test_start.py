"""Deciding `run.start`, pure: what is accepted, and rejections that name the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sreforge_contracts import (
    BUILTIN_AGENTS,
    MAX_JSON_DEPTH,
    MAX_MESSAGE_BYTES,
    RUN_ID_PATTERN,
    RunRejected,
    default_use_cases,
)
from sreforge_correlator import (
    Accepted,
    Rejected,
    ScenarioCatalog,
    StartPlan,
    decide_start,
    new_plan,
)
from sreforge_correlator._settings import CorrelatorSettings

from .conftest import T0

AGENTS = frozenset(BUILTIN_AGENTS)
PLAN = StartPlan(run_id="20261129-080000-mint01", alert_route="ab" * 16, at=T0)
CATALOG = ScenarioCatalog(default_use_cases())


def _decide(**body: object) -> Accepted | Rejected:
    return decide_start(json.dumps(body).encode(), PLAN, CATALOG.manifest, AGENTS)


def test_a_valid_start_is_accepted_with_the_minted_run_id_and_route() -> None:
    """Accepted: state in phase requested, expected alert from the manifest, RunRequested."""
    decision = _decide(scenario="latency-cache-stampede", agent="reference", time_scale=0.1)
    assert isinstance(decision, Accepted)
    state = decision.state
    assert (state.run_id, state.alert_route, state.phase) == (
        PLAN.run_id,
        PLAN.alert_route,
        "requested",
    )
    assert state.expected_alert == "BookshelfApiLatencyP99High"
    assert decision.event.alert_route == PLAN.alert_route
    assert decision.event.event_id == f"{PLAN.run_id}.RunRequested"
    assert decision.reply.accepted
    assert decision.reply.run_id == PLAN.run_id


def test_the_topology_asked_for_is_carried_to_the_deployer() -> None:
    """`topology` reaches RunRequested (None when absent: the deployer resolves it from the
    scenario's stack); an unknown one is refused."""
    compose = _decide(scenario="latency-cache-stampede", agent="noop", topology="compose")
    assert isinstance(compose, Accepted)
    assert compose.event.topology == "compose"
    default = _decide(scenario="latency-cache-stampede", agent="noop")
    assert isinstance(default, Accepted)
    assert default.event.topology is None
    unknown = _decide(scenario="latency-cache-stampede", agent="noop", topology="k8s")
    assert isinstance(unknown, Rejected)
    assert "topology" in unknown.event.reason


def test_a_client_run_id_is_kept() -> None:
    """A run.start naming its run_id gets that id."""
    decision = _decide(scenario="latency-cache-stampede", agent="noop", run_id="my-run-1")
    assert isinstance(decision, Accepted)
    assert decision.state.run_id == "my-run-1"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scenario": "Bad_Id!", "agent": "noop"}, "scenario:"),
        (
            {"scenario": "no-such-scenario", "agent": "noop"},
            "scenario: no scenario 'no-such-scenario'",
        ),
        (
            {"scenario": "latency-cache-stampede", "agent": "gpt-99"},
            "agent: unknown agent profile 'gpt-99'",
        ),
        ({"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 0}, "time_scale:"),
        ({"scenario": "latency-cache-stampede", "agent": "noop", "time_scale": 1.5}, "time_scale:"),
        ({"scenario": "latency-cache-stampede", "agent": "noop", "run_id": "A/B"}, "run_id:"),
        (
            {"scenario": "latency-cache-stampede", "agent": "noop", "color": "red"},
            "color: unknown field",
        ),
        ({"agent": "noop"}, "scenario: required field missing"),
    ],
)
def test_an_invalid_start_is_rejected_naming_the_field(body: dict[str, object], field: str) -> None:
    """Each refusal says which field is wrong, under the minted run id (for its record)."""
    decision = _decide(**body)
    assert isinstance(decision, Rejected)
    assert field in decision.reason
    assert decision.reason.startswith("run.start: ")
    assert isinstance(decision.event, RunRejected)
    assert decision.event.run_id == PLAN.run_id
    assert decision.reply.error == decision.reason
    assert not decision.reply.accepted


def test_a_malformed_body_still_gets_a_rejection() -> None:
    """Not JSON at all: a rejection (so the sender gets an answer), not a silent dead letter."""
    decision = decide_start(b"{not json", PLAN, CATALOG.manifest, AGENTS)
    assert isinstance(decision, Rejected)
    assert "malformed JSON" in decision.reason
    assert decision.event.scenario is None


def test_the_rejection_keeps_the_scenario_asked_for() -> None:
    """The recorder can file the rejection under the scenario the sender named."""
    decision = _decide(scenario="no-such-scenario", agent="noop")
    assert isinstance(decision, Rejected)
    assert decision.event.scenario == "no-such-scenario"


def test_an_invalid_manifest_is_named_in_the_rejection(tmp_path: Path) -> None:
    """A scenario folder whose manifest does not load is refused with the file's error."""
    folder = tmp_path / "uc" / "scenarios" / "broken-one"
    folder.mkdir(parents=True)
    (folder / "scenario.toml").write_text('id = "broken-one"\n')
    catalog = ScenarioCatalog(tmp_path)
    body = json.dumps({"scenario": "broken-one", "agent": "noop"}).encode()
    decision = decide_start(body, PLAN, catalog.manifest, AGENTS)
    assert isinstance(decision, Rejected)
    assert "scenario: 'broken-one' is not runnable" in decision.reason
    assert "scenario.toml" in decision.reason


def test_minted_routes_are_opaque_and_distinct() -> None:
    """Routes are random hex: no words, no run id, different per run."""
    plans = [new_plan(T0) for _ in range(20)]
    routes = {plan.alert_route for plan in plans}
    assert len(routes) == 20
    for plan in plans:
        assert all(c in "0123456789abcdef" for c in plan.alert_route)
        assert plan.run_id not in plan.alert_route
    assert all(re.fullmatch(RUN_ID_PATTERN, plan.run_id) for plan in plans)


def test_a_scripted_fixture_is_accepted_as_the_scripted_profile() -> None:
    """`scripted:<fixture>` runs the scripted rein on a named fixture, so it is a known agent."""
    decision = _decide(scenario="latency-cache-stampede", agent="scripted:longer-ttl.patch")
    assert isinstance(decision, Accepted)
    assert decision.state.agent == "scripted:longer-ttl.patch"


def test_every_profile_in_the_catalog_is_a_known_agent(tmp_path: Path) -> None:
    """An operator adds an agent by dropping `agents/<name>.toml`; the correlator accepts it."""
    (tmp_path / "my-agent.toml").write_text("name = 'my-agent'\n")
    settings = CorrelatorSettings(agents_dir=tmp_path)
    assert "my-agent" in settings.known_agents
    assert set(BUILTIN_AGENTS) <= settings.known_agents


@pytest.mark.parametrize(
    "agent",
    ["scripted:../../x", "scripted:/etc/passwd", "scripted:a/b", "scripted:..", "Noop", "noop:"],
)
def test_an_agent_label_that_could_name_a_path_is_refused_before_any_stack(agent: str) -> None:
    """`scripted:../../x` used to be accepted, and a whole stack came up before the runner
    refused it: the label's syntax is checked at run.start."""
    decision = _decide(scenario="latency-cache-stampede", agent=agent)
    assert isinstance(decision, Rejected)
    assert f"agent: {agent!r} is not an agent label" in decision.reason


def test_an_oversize_body_is_refused_naming_the_limit() -> None:
    """A ~1 MB run.start gets a RunRejected that says the limit, not a dead letter."""
    decision = _decide(scenario="latency-cache-stampede", agent="noop", pad="x" * 1_000_000)
    assert isinstance(decision, Rejected)
    assert f"over the limit of {MAX_MESSAGE_BYTES} bytes" in decision.reason
    assert decision.event.scenario is None, "an oversize body is not read for its scenario"


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    """The rejection path read the scenario with json.loads, which recursed until it crashed."""
    depth = 100_000
    body = b'{"scenario": "latency-cache-stampede", "x": ' + b"[" * depth + b"]" * depth + b"}"
    decision = decide_start(body, PLAN, CATALOG.manifest, AGENTS)
    assert isinstance(decision, Rejected)
    assert f"over the limit of {MAX_JSON_DEPTH}" in decision.reason


def test_a_scripted_fixture_that_does_not_exist_is_refused_at_run_start(tmp_path: Path) -> None:
    """`scripted:<name>` is looked up where the runner looks (the scenario's negatives, the
    scripts dir) before any stack is built; a present one is accepted from either place."""
    (tmp_path / "extra-fixture.sh").write_text("true\n")
    catalog = ScenarioCatalog(default_use_cases(), scripts_dir=tmp_path)

    def decide(agent: str) -> Accepted | Rejected:
        body = json.dumps({"scenario": "latency-cache-stampede", "agent": agent}).encode()
        return decide_start(body, PLAN, catalog.manifest, AGENTS, catalog.check_script)

    missing = decide("scripted:no-such-fixture")
    assert isinstance(missing, Rejected)
    assert "agent: scripted:no-such-fixture: no no-such-fixture[.patch|.sh] in" in missing.reason
    assert str(tmp_path) in missing.reason
    assert isinstance(decide("scripted:longer-ttl"), Accepted)
    assert isinstance(decide("scripted:extra-fixture"), Accepted)


def test_a_body_with_thousands_of_problems_gets_a_refusal_that_fits_on_the_bus() -> None:
    """16 000 bad labels made a ~900 KB reason, too big for the RunRejected that records it."""
    labels = {f"k{i}": i for i in range(16_000)}
    body = json.dumps({"scenario": "x" * 200, "agent": "noop", "labels": labels}).encode()
    decision = decide_start(body, PLAN, CATALOG.manifest, AGENTS)
    assert isinstance(decision, Rejected)
    assert "more problems" in decision.reason
    assert len(decision.event.model_dump_json()) < 8 * 1024
    assert decision.event.scenario is None


def test_labels_too_large_to_carry_through_the_run_are_refused() -> None:
    """A 200 KB label fits in a run.start but not in the RunRequested, state and record
    that copy it: accepted, it left a run in KV that could never be announced."""
    decision = _decide(scenario="latency-cache-stampede", agent="noop", labels={"a": "x" * 200_000})
    assert isinstance(decision, Rejected)
    assert "labels: 200001 characters, over the limit of 16384" in decision.reason
