"""End to end: `sreforge run` over the embedded engine, one real stack per run.

Each run is the real CLI in a subprocess with its own engine home, record dir and
stacks root (its own nats-server, trigger, Prometheus, Alertmanager, app and git);
a run that needs a doctored scenario gets its own copy of `use-cases/`. The
selected runs start when the session does, with every module's whole runs, behind one
set of slots (`SREFORGE_E2E_BACKGROUND`, default 2, while the ordinary tests run; then
`SREFORGE_E2E_PARALLEL`, default 3); these tests run last, each waits for its own run and
checks its verdict, its one schema-valid record and that nothing of it remains.

`cli-agent` is the README's "Plug in your agent" walk-through: the README's own
profile, pointed at a scripted fake CLI agent, in its own catalog; `agents check`,
then a whole run in bubblewrap, with canaries the agent must not reach.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from wholerun import (
    CASES_NOISE,
    REPO,
    SCENARIO_PARTS,
    Canaries,
    Run,
    RunPool,
    RunSpec,
    WholeRuns,
    finished,
    open_pool,
    plug_in,
)

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAKE_CLI = "fake-cli"
FAKE_CLI_AGENT = FIXTURES / "fake-cli-agent" / "fake-cli-agent"  # alone in its install dir
CANARY_ENV = "SREFORGE_ORACLE_SIGNING_KEY"  # a harness-looking secret in the run's env


def _harmless_change(cases: Path) -> None:
    """The scenario's recent deploy becomes a docs-only commit: the alert never fires."""
    (inject,) = cases.glob("/".join((*SCENARIO_PARTS, "inject")))
    for patch in inject.glob("*.patch"):
        patch.unlink()
    shutil.copyfile(FIXTURES / "harmless-change.patch", inject / "01-docs.patch")


def _without_page(cases: Path) -> None:
    """The scenario loses its `trigger.md`: the context stage cannot brief the run."""
    (page,) = cases.glob("/".join((*SCENARIO_PARTS, "trigger.md")))
    page.unlink()


def _plug_in_fake_cli(run: Run) -> None:
    """The README's walk-through for a scripted CLI agent, with canaries around it.

    Its own copy of the catalog and of `use-cases/`, the README's profile pointed at
    the fake agent (which also tries to read what it must not), canaries in the
    engine home, the scenario folder and the run's env, then `sreforge agents check`.
    """
    run.cases = run.root / "cases"
    shutil.copytree(REPO / "use-cases", run.cases, ignore=CASES_NOISE)
    (scenario,) = run.cases.glob("/".join(SCENARIO_PARTS))
    home = run.engine_home
    home.mkdir()
    run.canaries = Canaries.planted(home / "canary.txt", scenario / "canary.txt")
    (original,) = (REPO / "use-cases").glob("/".join(SCENARIO_PARTS))
    probes = ["{prompt_file}", "--try-read", "{prompt_file}", "--try-env", "HOME"]  # controls
    for where in (scenario, original):
        probes += ["--try-list", str(where / "verify")]
        probes += ["--try-read", str(where / "solution" / "fix.patch")]
    for path in (*run.canaries.files, REPO / "pyproject.toml"):
        probes += ["--try-read", str(path)]
    probes += ["--try-env", CANARY_ENV]
    run.bystander = socket.create_server(("127.0.0.1", 0))  # reachable from the host
    probes += ["--try-tcp", f"127.0.0.1:{run.bystander.getsockname()[1]}"]
    run.extra_env[CANARY_ENV] = run.canaries.env_value
    # Installed outside the checkout, as a user's agent is: the install folder is bound at
    # its host path, and a clone named after the harness would rightly trip the guard.
    _plug_in(run, run.root / "tools", probes)


def _plug_in_from_a_telling_folder(run: Run) -> None:
    """The walk-through's fake CLI agent installed under a folder named after the harness:
    bound at its host path, so bubblewrap's command line shows it inside the sandbox."""
    _plug_in(run, run.root / "sreforge-tools", ["{prompt_file}"])


def _plug_in(run: Run, tools: Path, args: list[str]) -> None:
    """The fake agent installed in `tools`, the README's profile for it (with `args`) in the
    run's own catalog, then `sreforge agents check`."""
    description = "A scripted fake CLI agent (tests/e2e/fixtures), inside bubblewrap."
    plug_in(run, FAKE_CLI_AGENT, tools, name=FAKE_CLI, description=description, args=args)


# Longest first (measured walls in seconds, 2 at a time on 2 cores), so the pool's
# slots finish close together: about 4.5 min for all ten in a full CI run.
RUNS = {
    "reference": RunSpec("reference"),  # ~90
    "cli-agent": RunSpec(FAKE_CLI, prepare=_plug_in_fake_cli),  # ~90 (+1 s agents check)
    "negative": RunSpec("scripted:longer-ttl"),  # ~60
    "cut-timeout": RunSpec("scripted:cut-upstream-timeout"),  # ~60: fast but degraded
    "silent": RunSpec("noop", _harmless_change),  # ~50: stack, arm, 24 s confirm-fire
    "telling-install": RunSpec(FAKE_CLI, prepare=_plug_in_from_a_telling_folder),  # ~40
    "breaks-tests": RunSpec("scripted:break-tests"),  # ~45
    "no-page": RunSpec("noop", _without_page),  # ~35
    "noop": RunSpec("noop"),  # ~35
    "gives-up": RunSpec("scripted:give-up"),  # ~35
    "kills-load": RunSpec("scripted:kill-load"),  # ~33
}
TEST_RUNS = {
    "test_reference_fix_passes": "reference",
    "test_plugged_in_cli_agent_mitigates_and_reaches_no_secret": "cli-agent",
    "test_negative_fixture_fails": "negative",
    "test_fast_but_degraded_fix_fails_the_service_gate": "cut-timeout",
    "test_submission_breaking_the_tests_is_rejected": "breaks-tests",
    "test_noop_agent_fails": "noop",
    "test_agent_killing_the_load_does_not_pass": "kills-load",
    "test_an_agent_that_gives_up_is_shown_with_its_exit_code_and_stderr": "gives-up",
    "test_alert_that_never_fires_aborts": "silent",
    "test_a_tell_in_the_agents_sandbox_aborts_before_it_starts": "telling-install",
    "test_stage_that_cannot_work_ends_in_error": "no-page",
}
WHOLE_RUNS = WholeRuns(RUNS, TEST_RUNS, scripts_dir=FIXTURES)
GRADED_TIMINGS = ("stack", "arm", "trigger", "context", "run", "ci", "redeploy", "verify")


@pytest.fixture(scope="module")
def pool(request: pytest.FixtureRequest) -> Iterator[RunPool]:
    """The selected tests' runs, all started when the first asks; torn down after the module."""
    with open_pool(request, WHOLE_RUNS) as runs:
        yield runs


@pytest.mark.timeout(300)
def test_reference_fix_passes(pool: RunPool) -> None:
    """The reference fix goes through CI, merge and a gated redeploy, and passes."""
    run, outcome, record = finished(pool, "reference")
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 0
    assert record["ci"]["green"]
    assert "passed" in record["ci"]["output"]
    assert record["deploy"]["redeployed"]
    assert record["deploy"]["readiness"] == "passed"
    assert record["sli_series"], "a graded run has SLI samples"
    missing = [t for t in GRADED_TIMINGS if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_plugged_in_cli_agent_mitigates_and_reaches_no_secret(pool: RunPool) -> None:
    """The README's walk-through with a scripted CLI agent: `agents check` makes it ready;
    in bubblewrap it reads the page, reverts the culprit and submits an RCA; the run passes
    with a `host-sandboxed` transcript; no canary (env secret, engine-home and scenario
    files, verify/, solution/, the checkout, a host port) was readable or appears in anything
    kept; the addresses on the page are reachable from its network namespace."""
    run, outcome, record = finished(pool, "cli-agent")
    assert "readiness READY" in run.check_output, run.check_output
    assert outcome["verdict"] == "passed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 0
    assert record["proof_run"] is False, "a checked profile is not a proof run"
    transcript = record["agent_transcript"]
    assert (transcript["confinement"], transcript["harness"]) == ("host-sandboxed", FAKE_CLI)
    assert transcript["submitted"]
    assert record["trajectory"]["submitted"]
    said = [line["text"] for line in transcript["raw_json"]["lines"]]
    for step in ("stdin closed", "read the page", "reverting", "submitted"):
        assert any(step in text for text in said), f"agent never said {step!r}: {said}"
    endpoints = [text.rsplit(": ", 1) for text in said if text.startswith("endpoint ")]
    assert len(endpoints) >= 3, f"the page's API, Prometheus, Alertmanager: {endpoints}"
    assert all(seen == "reachable" for _, seen in endpoints), f"not relayed: {endpoints}"
    record_dir = Path(outcome["record"]).parent
    assert "reverting" in (record_dir / "rca.txt").read_text()
    listed = [entry["path"] for entry in transcript["raw_json"]["files"]]
    assert {"agent/output.log", "agent/stream.jsonl"} <= set(listed), listed
    assert all((record_dir / path).is_file() for path in listed), "kept after the stack went"
    assert (record_dir / "agent" / "agent-transcript.json").is_file()
    (fix,) = REPO.glob("use-cases/" + "/".join((*SCENARIO_PARTS, "solution", "fix.patch")))
    assert _changes(record["trajectory"]["diff"]) == _changes(fix.read_text()), "not the revert"
    assert_no_canary_reached(run, record_dir, said)


def _changes(diff: str) -> list[str]:
    """The added and removed lines of a unified diff."""
    lines = diff.splitlines()
    return [line for line in lines if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")]


def assert_no_canary_reached(run: Run, record_dir: Path, said: list[str]) -> None:
    """The agent's controls were readable and every probe of a secret (files, env, a host
    port off its allowlist) was not; no canary value is in the record dir, the CLI's logs
    or the copies of the agent's logs."""
    probes = [text.rsplit(": ", 1) for text in said if text.startswith("probe ")]
    controls, secret = probes[:2], probes[2:]  # in the order the profile gives them
    assert all(seen == "readable" for _, seen in controls), f"probes cannot tell: {controls}"
    assert len(secret) == 9, f"expected nine probes of secrets: {secret}"
    reached = [what for what, seen in secret if seen != "unreadable"]
    assert not reached, f"the agent reached: {reached}"
    assert run.canaries is not None
    kept = sorted(run.agent_logs.iterdir())
    assert {"output.log", "stream.jsonl"} <= {path.name for path in kept}, kept
    places = [*record_dir.rglob("*"), run.root / "stderr.log", *kept]
    for path in (place for place in places if place.is_file()):
        text = path.read_text(errors="replace")
        for value in run.canaries.values:
            assert value not in text, f"a canary value is in {path}"
    for value in run.canaries.values:
        assert value not in run.stdout + run.check_output


@pytest.mark.timeout(300)
def test_negative_fixture_fails(pool: RunPool) -> None:
    """The known-bad fix (a longer TTL) is deployed but does not mitigate: failed, and not
    by a hair: the alert the deploy's drain let resolve is not credited as cleared."""
    run, outcome, record = finished(pool, "negative")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    signals = {found["id"]: found for found in record["score"]["signals"]}
    assert not signals["alert_cleared"]["satisfied"], signals["alert_cleared"]
    assert record["score"]["score"] < 0.5
    assert run.exit_code == 1
    assert record["ci"]["green"]
    assert record["deploy"]["redeployed"]
    assert record["sli_series"], "a graded run has SLI samples"
    missing = [t for t in GRADED_TIMINGS if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_fast_but_degraded_fix_fails_the_service_gate(pool: RunPool) -> None:
    """Cutting the upstream timeout clears the latency alert, but searches come back
    without metadata: `service_held` fails, so the run fails whatever its score."""
    run, outcome, record = finished(pool, "cut-timeout")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"]["green"]
    signals = {found["id"]: found for found in record["score"]["signals"]}
    assert "service_held" in signals, sorted(signals)
    assert not signals["service_held"]["satisfied"], signals["service_held"]
    assert signals["load_held"]["satisfied"], signals["load_held"]


@pytest.mark.timeout(300)
def test_submission_breaking_the_tests_is_rejected(pool: RunPool) -> None:
    """A fix that breaks the app's own tests is stopped by CI: rejected, with its output."""
    run, outcome, record = finished(pool, "breaks-tests")
    assert outcome["verdict"] == "rejected", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    ci = record["ci"]
    assert ci["green"] is False
    assert ci["exit_code"] == 1
    assert "test_entries_are_fresh_then_stale_then_gone" in ci["output"]
    assert "failed" in ci["output"]
    assert record["deploy"] is None, "a red submission is never deployed"
    missing = [t for t in ("stack", "arm", "trigger", "run", "ci") if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_noop_agent_fails(pool: RunPool) -> None:
    """An agent that never submits fails closed after a real page."""
    run, outcome, record = finished(pool, "noop")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"] is None
    assert record["deploy"] is None
    phases = ("stack", "arm", "trigger", "context", "run")
    missing = [t for t in phases if not record["timings"].get(t)]
    assert not missing, f"phase timings missing: {missing}: {record['timings']}"


@pytest.mark.timeout(300)
def test_an_agent_that_gives_up_is_shown_with_its_exit_code_and_stderr(pool: RunPool) -> None:
    """An agent exiting 3 without submitting: the CLI's phase line and JSON outcome and
    the record name exit code 3 and its last stderr lines, and its output log and stamped
    stream are kept in `runs/<id>/agent/` after the stack is gone."""
    run, outcome, record = finished(pool, "gives-up")
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert "no submission (exited, exit code 3)" in run.progress, run.progress
    last = "giving up: cannot reproduce the latency here"
    assert outcome["agent_exit"]["exit_code"] == 3
    assert outcome["agent_exit"]["stderr_tail"][-1] == last
    ended = record["trajectory"]["agent_exit"]
    assert (ended["exit_code"], ended["timeout"], ended["stderr_tail"][-1]) == (3, None, last)
    kept = Path(outcome["record"]).parent / "agent"
    assert last in (kept / "output.log").read_text()
    streamed = [json.loads(line) for line in (kept / "stream.jsonl").read_text().splitlines()]
    assert {"stream": "stderr", "text": last} in [
        {key: line[key] for key in ("stream", "text")} for line in streamed
    ]


@pytest.mark.timeout(300)
def test_agent_killing_the_load_does_not_pass(pool: RunPool) -> None:
    """An agent that kills the load generator, then ships the real fix, does not pass."""
    run, outcome, record = finished(pool, "kills-load", graded=False)
    assert outcome["verdict"] == "failed", f"{outcome}\n{run.progress}"
    assert run.exit_code == 1
    assert record["ci"] is not None, "the fix went through CI"
    assert record["ci"]["green"], "the fix itself is fine"
    assert record["trajectory"]["submitted"], "the agent got as far as submitting"
    why = [s["detail"] for s in record["score"]["signals"] if not s["satisfied"]]
    why += [str(record["deploy"]), str(record["abort_reason"])]
    assert any("load" in text for text in why), f"nothing names the load: {why}"


@pytest.mark.timeout(300)
def test_alert_that_never_fires_aborts(pool: RunPool) -> None:
    """A harmless recent deploy never pages: confirm-fire gives up and the run is aborted."""
    run, outcome, record = finished(pool, "silent", graded=False)
    assert outcome["verdict"] == "aborted", f"{outcome}\n{run.progress}"
    assert run.exit_code == 3
    reason = record["abort_reason"] or ""
    assert reason.startswith("confirm-fire: "), reason
    assert "BookshelfApiLatencyP99High" in reason, reason
    assert "did not fire" in reason, reason
    assert record["trigger"] is None, "nothing fired"
    assert record["ci"] is None
    assert record["deploy"] is None


@pytest.mark.timeout(300)
def test_a_tell_in_the_agents_sandbox_aborts_before_it_starts(pool: RunPool) -> None:
    """The agent's install folder names the harness: the runner's guard probes the sandbox
    before the agent starts, and the run is aborted naming the tell and where it showed."""
    run, outcome, record = finished(pool, "telling-install", graded=False)
    assert "readiness READY" in run.check_output, run.check_output
    assert outcome["verdict"] == "aborted", f"{outcome}\n{run.progress}"
    assert run.exit_code == 3
    reason = record["abort_reason"] or ""
    assert reason.startswith("runner: contamination guard: "), reason
    assert "harness word 'sreforge' in sandbox process titles" in reason, reason
    assert record["trigger"] is not None, "the agent was paged"
    assert record["ci"] is None
    assert record["deploy"] is None


@pytest.mark.timeout(300)
def test_stage_that_cannot_work_ends_in_error(pool: RunPool) -> None:
    """A scenario without its page: the context stage fails the paged run with `error`."""
    run, outcome, record = finished(pool, "no-page", graded=False)
    assert outcome["verdict"] == "error", f"{outcome}\n{run.progress}"
    assert run.exit_code == 4
    reason = record["abort_reason"] or ""
    assert reason.startswith("context: "), reason
    assert "trigger.md" in reason, reason
    assert record["trigger"] is not None, "the alert did fire before the stage failed"
    assert record["ci"] is None
    assert record["deploy"] is None
