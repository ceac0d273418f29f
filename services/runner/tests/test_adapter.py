"""The runner on a real bus: BriefReady → one agent session → one Submitted."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sreforge_bus import STREAM, Bus, bootstrap
from sreforge_bus.testing import consumer_settled, poll
from sreforge_contracts import (
    AgentContext,
    AgentTranscript,
    BriefReady,
    EvalOnly,
    OperationalReadiness,
    RunContract,
    RunFailed,
    RunState,
    RunWorkspace,
    ScenarioRef,
    StackInfo,
    Submission,
    Submitted,
    parse_event,
)
from sreforge_runner import ProbeRecord, RunnerSettings, build_service, claim_key, head_commit
from sreforge_runner._handoff import MAX_RESTARTS

pytestmark = pytest.mark.integration


async def stored(bus: Bus, subject: str) -> list[bytes]:
    """Every message the stream holds on exactly `subject`, in order."""
    info = await bus.js.stream_info(STREAM, subjects_filter=subject)
    count = (info.state.subjects or {}).get(subject, 0)
    sub = await bus.js.subscribe(subject, ordered_consumer=True)
    try:
        return [(await sub.next_msg(timeout=5)).data for _ in range(count)]
    finally:
        await sub.unsubscribe()


@pytest.fixture
async def runner(bus: Bus, settings: RunnerSettings) -> AsyncIterator[Bus]:
    """The runner service running on `bus` over the project's use-cases root."""
    service = build_service(settings)
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    yield bus
    stop.set()
    await asyncio.wait_for(task, 30)


async def start_run(
    bus: Bus,
    project: Any,
    run_id: str,
    agent: str,
    labels: dict[str, str] | None = None,
    agent_deadline: datetime | None = None,
) -> BriefReady:
    """Put the run's state in KV and return the BriefReady the context service would send."""
    workspace = RunWorkspace(path=str(project.workspace), service="api")
    state = RunState(
        run_id=run_id,
        scenario_id=project.scenario_id,
        agent=agent,
        time_scale=0.1,
        labels=labels or {},
        alert_route="r0ute",
        phase="briefed",
        agent_deadline=agent_deadline,
        stack=StackInfo(
            stack="local",
            run_dir=str(project.workspace.parent),
            agent_endpoints={},
            operator_endpoints={},
            run_workspace=workspace,
        ),
    )
    await bus.runs.put(run_id, state.model_dump_json().encode())
    contract = RunContract(
        agent_context=AgentContext(services={}, run_workspace=workspace),
        scenario=ScenarioRef(id=project.scenario_id, run_id=run_id),
        eval_only=EvalOnly(
            alert_to_clear="CheckoutLatencyHigh",
            max_clear_time_seconds=60,
            sustained_clear_seconds=36,
        ),
    )
    return BriefReady(run_id=run_id, producer="context", page="# page\n", contract=contract)


async def deliver_twice(bus: Bus, brief: BriefReady) -> None:
    """Deliver `brief`, then again under another message id (a redelivery), and settle."""
    await bus.publish(brief)
    await poll(lambda: consumer_settled(bus, "runner"), "runner to handle BriefReady", 60)
    data = brief.model_dump_json().encode()
    await bus.publish_raw(brief.subject, data, {"Nats-Msg-Id": f"{brief.event_id}.again"})
    await poll(lambda: consumer_settled(bus, "runner"), "runner to handle the redelivery", 60)


async def only_submission(bus: Bus, run_id: str) -> Submission:
    """The run's single Submitted event's submission."""
    found = await stored(bus, f"sreforge.run.{run_id}.Submitted")
    assert len(found) == 1
    event = parse_event(found[0])
    assert isinstance(event, Submitted)
    return event.submission


def added_lines(patch: Path) -> list[str]:
    """The `+` lines of a patch (without the `+++` header)."""
    lines = patch.read_text().splitlines()
    return [line for line in lines if line.startswith("+") and not line.startswith("+++")]


def read_transcript(submission: Submission) -> AgentTranscript:
    """The agent-transcript file a submission points at (relative to the run's folder,
    which holds the runner's agent folder)."""
    assert submission.transcript_ref is not None
    assert submission.agent_dir is not None
    run_folder = Path(submission.agent_dir).parent
    return AgentTranscript.model_validate_json((run_folder / submission.transcript_ref).read_text())


def commits_since(workspace: Path, base: str) -> int:
    """How many commits HEAD is ahead of `base`."""
    done = subprocess.run(
        ["git", "rev-list", "--count", f"{base}..HEAD"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


async def test_noop_submits_nothing_once(runner: Bus, project: Any) -> None:
    """The baseline: no diff, not submitted, one Submitted even when redelivered."""
    await deliver_twice(runner, await start_run(runner, project, "run-noop", "noop"))
    submission = await only_submission(runner, "run-noop")
    assert submission.agent_name == "noop"
    assert not submission.submitted
    assert submission.diff == ""
    assert submission.stop_reason == "no_action"
    assert submission.evidence["rein"] == "noop"


@pytest.mark.timeout(180)
async def test_reference_submits_the_fix_and_runs_once(runner: Bus, project: Any) -> None:
    """The reference fix is the diff; a redelivery does not apply it a second time."""
    base = head_commit(project.workspace)
    await deliver_twice(runner, await start_run(runner, project, "run-ref", "reference"))
    submission = await only_submission(runner, "run-ref")
    assert submission.submitted, submission.evidence
    assert submission.stop_reason == "exited"
    assert submission.evidence["exit_code"] == 0
    assert submission.evidence["base_commit"] == base
    diff = submission.diff.splitlines()
    assert all(line in diff for line in added_lines(project.fix))
    assert ".oncall" not in submission.diff
    assert commits_since(project.workspace, base) == 1


@pytest.mark.timeout(180)
async def test_a_scripted_negative_patch_is_submitted(runner: Bus, project: Any) -> None:
    """`scripted:<name>` applies the scenario's negative fixture like the reference fix."""
    negative: Path = project.negative
    brief = await start_run(runner, project, "run-neg", f"scripted:{negative.stem}")
    await deliver_twice(runner, brief)
    submission = await only_submission(runner, "run-neg")
    assert submission.submitted, submission.evidence
    assert submission.agent_name == f"scripted:{negative.stem}"
    assert all(line in submission.diff.splitlines() for line in added_lines(negative))


@pytest.mark.parametrize("limit", ["label", "deadline"])
async def test_an_agent_over_budget_is_stopped_and_its_work_kept(
    runner: Bus, project: Any, tmp_path: Path, limit: str
) -> None:
    """The budget (a run label, or the run's agent deadline) fires: stop reason recorded,
    no submission, the edits made so far in the diff."""
    script = tmp_path / "slow.sh"
    script.write_text("echo 'SLOW = True' >> notes.py\nsleep 300\nsubmit\n")
    labels = {"script": str(script)}
    deadline = None
    if limit == "label":
        labels["budget_seconds"] = "2"
    else:
        deadline = datetime.now(UTC) + timedelta(seconds=3)
    brief = await start_run(runner, project, f"run-slow-{limit}", "scripted", labels, deadline)
    await deliver_twice(runner, brief)
    submission = await only_submission(runner, f"run-slow-{limit}")
    assert submission.stop_reason == "timeout:total"
    assert submission.evidence["timeout"] == "total"
    budget = submission.evidence["budget_seconds"]
    assert isinstance(budget, float)
    assert budget <= 3
    assert not submission.submitted
    assert "+SLOW = True" in submission.diff.splitlines()


async def test_an_unknown_agent_fails_the_run(runner: Bus, project: Any) -> None:
    """A profile the runner cannot resolve ends the run as an engine error, naming it."""
    await deliver_twice(runner, await start_run(runner, project, "run-bad", "no-such-agent"))
    found = await stored(runner, "sreforge.run.run-bad.RunFailed")
    assert len(found) == 1
    failed = parse_event(found[0])
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("runner", "error")
    assert "no-such-agent" in failed.reason
    assert await stored(runner, "sreforge.run.run-bad.Submitted") == []


async def test_a_runner_restarted_after_the_agent_submitted_submits_what_the_workspace_holds(
    runner: Bus, project: Any
) -> None:
    """The claim exists but no outcome was saved (the runner died after the agent wrote its
    sentinel): the agent is not re-run; the workspace's diff against the claimed base and
    the sentinel are submitted."""
    workspace: Path = project.workspace
    base = head_commit(workspace)
    claim = json.dumps({"base_commit": base, "agent": "reference"}).encode()
    assert await runner.runs.claim(claim_key("run-crash"), claim)
    (workspace / "hotfix.py").write_text("PATCHED = True\n")
    (workspace / ".oncall").mkdir()
    (workspace / ".oncall" / "submitted").write_text('{"submitted_at": "t", "rca": false}')
    await deliver_twice(runner, await start_run(runner, project, "run-crash", "reference"))
    submission = await only_submission(runner, "run-crash")
    assert submission.stop_reason == "interrupted"
    assert submission.submitted
    assert "+PATCHED = True" in submission.diff.splitlines()
    assert ".oncall" not in submission.diff
    assert commits_since(workspace, base) == 0  # the reference fix was not applied


async def test_a_runner_restarted_before_the_agent_submitted_restarts_the_session(
    runner: Bus, project: Any
) -> None:
    """The claim exists, no outcome was saved and the agent had not submitted: the session
    the harness cut short is neither graded nor failed but started again from the hand-off
    state (the half-done edit is gone), once, counted as a restart in evidence and
    submission; the claim remembers it."""
    workspace: Path = project.workspace
    base = head_commit(workspace)
    claim = json.dumps({"base_commit": base, "agent": "reference"}).encode()
    assert await runner.runs.claim(claim_key("run-cut"), claim)
    (workspace / "half_done.py").write_text("PATCHED = 'partly'\n")
    await deliver_twice(runner, await start_run(runner, project, "run-cut", "reference"))
    assert await stored(runner, "sreforge.run.run-cut.RunFailed") == []
    submission = await only_submission(runner, "run-cut")
    assert submission.submitted
    assert (submission.restarts, submission.evidence["restarts"]) == (1, 1)
    assert "half_done.py" not in submission.diff
    assert commits_since(workspace, base) == 1  # the reference fix, applied once
    entry = await runner.runs.get(claim_key("run-cut"))
    assert entry is not None
    assert json.loads(entry.value)["restarts"] == 1


async def test_a_runner_that_keeps_dying_mid_session_ends_the_run_as_an_error(
    runner: Bus, project: Any
) -> None:
    """A session already restarted MAX_RESTARTS times is not restarted again: one RunFailed
    `error` naming the interruptions (never `failed`), no Submitted."""
    workspace: Path = project.workspace
    record = {"base_commit": head_commit(workspace), "agent": "reference"}
    claim = json.dumps({**record, "restarts": MAX_RESTARTS}).encode()
    assert await runner.runs.claim(claim_key("run-cut"), claim)
    await deliver_twice(runner, await start_run(runner, project, "run-cut", "reference"))
    found = await stored(runner, "sreforge.run.run-cut.RunFailed")
    assert len(found) == 1
    failed = parse_event(found[0])
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("runner", "error")
    assert "interrupted mid-session" in failed.reason
    assert await stored(runner, "sreforge.run.run-cut.Submitted") == []


async def test_a_blocked_profile_is_refused_before_any_sandbox_exists(
    runner: Bus, project: Any, settings: RunnerSettings
) -> None:
    """A stored blocked probe: RunFailed names owner and evidence; no agent dir, no claim."""
    settings.readiness_dir.mkdir(parents=True, exist_ok=True)
    blocked = OperationalReadiness(
        state="blocked", owner="infra", evidence="codex not installed on this runner"
    )
    record = ProbeRecord(
        profile="codex", readiness=blocked, checks=(), checked_at=datetime.now(UTC)
    )
    (settings.readiness_dir / "codex.json").write_text(record.model_dump_json())
    await deliver_twice(runner, await start_run(runner, project, "run-blocked", "codex"))
    found = await stored(runner, "sreforge.run.run-blocked.RunFailed")
    assert len(found) == 1
    failed = parse_event(found[0])
    assert isinstance(failed, RunFailed)
    assert "refused at resolution" in failed.reason
    assert "owner: infra" in failed.reason
    assert "codex not installed" in failed.reason
    assert not (project.workspace.parent / "agent").exists()
    assert await runner.runs.get(claim_key("run-blocked")) is None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_a_cli_agent_profile_runs_sandboxed_and_submits(
    bus: Bus, project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """A catalog profile with the `command` rein: the fake CLI agent reads the page inside
    bubblewrap, edits and submits; the Submitted evidence says host-sandboxed."""
    install = tmp_path / "fake-install"
    install.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "fake-agent", install / "fake-agent")
    agents = tmp_path / "agents"
    shutil.copytree(settings.agents_dir, agents)
    (agents / "fake-cli.toml").write_text(
        'name = "fake-cli"\nrein = "command"\nsandbox = "host-sandboxed"\n'
        "[limits]\nsession_start_s = 30\nidle_s = 30\ntotal_s = 60\n"
        f'[command]\npreset = "custom"\nexecutable = "{install}/fake-agent"\n'
        f'args = ["--prompt-file", "{{prompt_file}}"]\ninstall_paths = ["{install}"]\n'
    )
    service = build_service(settings.model_copy(update={"agents_dir": agents}))
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        brief = await start_run(bus, project, "run-cli", "fake-cli")
        brief = brief.model_copy(update={"page": "# Slow\n\nEdit file: tuned.py\n"})
        await deliver_twice(bus, brief)
        submission = await only_submission(bus, "run-cli")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert submission.submitted, submission.evidence
    assert submission.evidence["confinement"] == "host-sandboxed"
    assert submission.evidence["proof_run"] is True
    assert "+TTL = 60" in submission.diff.splitlines()
    assert "Edit file" not in json.dumps(submission.evidence)
    assert submission.transcript_ref is not None
    header = read_transcript(submission)
    assert (header.confinement, header.run_id, header.harness) == (
        "host-sandboxed",
        "run-cli",
        "fake-cli",
    )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_a_sandbox_showing_a_tell_aborts_the_run_before_the_agent_starts(
    bus: Bus, project: Any, settings: RunnerSettings, tmp_path: Path
) -> None:
    """The runner leaks the harness's name into the confined agent's env (a profile env
    value): the run fails `aborted` at the runner with the guard's reason naming the
    variable and the word, once however often the brief is delivered; no Submitted, and
    the agent never ran."""
    install = tmp_path / "fake-install"
    install.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "fake-agent", install / "fake-agent")
    agents = tmp_path / "agents"
    shutil.copytree(settings.agents_dir, agents)
    (agents / "fake-cli.toml").write_text(
        'name = "fake-cli"\nrein = "command"\nsandbox = "host-sandboxed"\n'
        "[limits]\nsession_start_s = 30\nidle_s = 30\ntotal_s = 60\n"
        f'[command]\npreset = "custom"\nexecutable = "{install}/fake-agent"\n'
        f'args = ["--prompt-file", "{{prompt_file}}"]\ninstall_paths = ["{install}"]\n'
        '[command.env]\nCACHE_DIR = "/var/cache/sreforge"\n'
    )
    service = build_service(settings.model_copy(update={"agents_dir": agents}))
    await bootstrap(bus, [route.consumer for route in service.routes])
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        brief = await start_run(bus, project, "run-tell", "fake-cli")
        await deliver_twice(bus, brief.model_copy(update={"page": "Edit file: tuned.py\n"}))
        found = await stored(bus, "sreforge.run.run-tell.RunFailed")
        submitted = await stored(bus, "sreforge.run.run-tell.Submitted")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert submitted == []
    assert len(found) == 1
    failed = parse_event(found[0])
    assert isinstance(failed, RunFailed)
    assert (failed.stage, failed.verdict) == ("runner", "aborted")
    assert failed.reason == (
        "contamination guard: harness tells visible to the agent: "
        "harness word 'sreforge' in sandbox env CACHE_DIR"
    )
    agent_log = project.workspace.parent / "agent" / "output.log"
    assert not agent_log.exists() or "fake-agent" not in agent_log.read_text()
