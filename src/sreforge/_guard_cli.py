"""`sreforge guard <scenario>`: bring the stack up, scan every agent-visible surface, tear down.

A scenario author's check that nothing the agent can read gives the rig away: the
page, the workspace and its whole git store, what the stack's endpoints answer (a patch
scenario has none: its workspace at `base_commit` and its task page),
and the sandbox (process titles, env, HOME, `/opt/oncall/bin`, probed from inside a
real bubblewrap sandbox by the runner's own `probe_sandbox`, as every confined run is).
Exit 0 clean, 1 on a hit, 2 on a usage or setup error. Progress goes to stderr;
`--json` prints the hits on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from sreforge_context import (
    ContextError,
    ContextSettings,
    GuardScan,
    SandboxView,
    Tells,
    brief_for,
    guard_scan,
)
from sreforge_contracts import (
    BriefReady,
    ContractError,
    RunRequested,
    RunState,
    RunWorkspace,
    Scenario,
    StackInfo,
    load_scenario,
    new_run_id,
)
from sreforge_deployer import DeployerError, DeployerSettings, PatchTopology
from sreforge_deployer.local import LocalStack
from sreforge_runner import HostSandbox, RunnerSettings, SandboxError, probe_sandbox

from sreforge._stack_cli import cli_owned_settings, resolve_scenario, sigterm_interrupts

__all__ = ["add_guard_command", "handle_guard"]

# Where Alertmanager would page in a run (the trigger's route shape); nothing listens.
_WEBHOOK_BASE = "http://127.0.0.1:9/v1/alertmanager"


def add_guard_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `sreforge guard`."""
    guard = verbs.add_parser(
        "guard", help="scan everything the agent could read in a scenario's run for tells"
    )
    guard.add_argument("scenario", help="scenario id (e.g. latency-cache-stampede) or folder")
    guard.add_argument("--time-scale", type=float, default=1.0, help="0 < S <= 1 (default 1)")
    guard.add_argument("--json", action="store_true", help="print the hits as JSON on stdout")
    guard.set_defaults(handler=handle_guard)


def handle_guard(args: argparse.Namespace) -> int:
    """Up, arm, build the page and the sandbox, scan, print the hits, tear down.

    A patch scenario has no stack: its workspace at `base_commit` and its task page are
    what the agent reads (and the sandbox around them). SIGTERM stops it as Ctrl-C does,
    the stack torn down on the way out."""
    with sigterm_interrupts():
        return _guard(args)


def _guard(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(resolve_scenario(args.scenario))
        stack: LocalStack | PatchTopology
        if scenario.manifest.profile == "patch":
            settings = DeployerSettings(use_cases=scenario.path.parents[2])
            stack = PatchTopology.open(_patch_request(scenario, args.time_scale), settings)
        elif scenario.manifest.expected is None:
            raise ValueError(f"scenario {scenario.id}: no [expected] alert to brief")
        else:
            stack = LocalStack(
                scenario.path,
                time_scale=args.time_scale,
                webhook_url=_WEBHOOK_BASE,
                settings=cli_owned_settings(),
            )
    except (ValueError, ContractError, DeployerError) as error:
        print(f"sreforge guard: {error}", file=sys.stderr)
        return 2
    try:
        if isinstance(stack, PatchTopology):
            scan = _scan_patch(stack, scenario, args.time_scale)
        else:
            scan = _scan(stack, scenario, args.time_scale)
    except (DeployerError, ContextError, ContractError, SandboxError, OSError) as error:
        print(f"sreforge guard: {error}", file=sys.stderr)
        return 2
    finally:
        torn_down = _down(stack)
    if not torn_down:
        return 2
    _report(scan, as_json=args.json)
    return 1 if scan.leaks else 0


def _down(stack: LocalStack | PatchTopology) -> bool:
    _progress("tearing the stack down ...")
    try:
        stack.down()
    except DeployerError as error:
        print(f"sreforge guard: teardown: {error}", file=sys.stderr)
        return False
    return True


def _patch_request(scenario: Scenario, time_scale: float) -> RunRequested:
    return RunRequested(
        run_id=new_run_id(),
        producer="guard",
        scenario=scenario.id,
        agent="guard",
        time_scale=time_scale,
        alert_route=secrets.token_hex(16),
    )


def _scan_patch(topology: PatchTopology, scenario: Scenario, time_scale: float) -> GuardScan:
    _progress(f"building the workspace of {scenario.id} at its base commit ...")
    facts = topology.up()
    topology.arm()
    info = StackInfo(
        stack=facts.stack,
        run_dir=str(facts.run_dir),
        agent_endpoints={},
        operator_endpoints={},
        run_workspace=RunWorkspace(path=str(facts.workspace), service=facts.service),
    )
    state = _run_state(scenario, time_scale, facts.run_dir.name, secrets.token_hex(16), info)
    return _scan_surfaces(state, scenario, facts.workspace, facts.run_dir / "agent", {})


def _scan(stack: LocalStack, scenario: Scenario, time_scale: float) -> GuardScan:
    _progress(f"starting stack {stack.run_id} for {scenario.id} (time scale {time_scale:g}) ...")
    stack.up()
    _progress(f"armed at {stack.arm()}; building the page ...")
    if stack.workspace is None:
        raise DeployerError(f"stack {stack.run_id} came up without a workspace")
    workspace = Path(stack.workspace.path)
    info = StackInfo(
        stack=stack.spec.name,
        run_dir=str(stack.run_dir),
        agent_endpoints=stack.endpoints.agent,
        operator_endpoints=stack.endpoints.operator,
        run_workspace=RunWorkspace(path=str(workspace), service=stack.spec.service),
    )
    state = _run_state(scenario, time_scale, stack.run_id, stack.webhook_route, info)
    return _scan_surfaces(
        state, scenario, workspace, stack.run_dir / "agent", stack.endpoints.agent
    )


def _scan_surfaces(
    state: RunState, scenario: Scenario, workspace: Path, root: Path, endpoints: dict[str, str]
) -> GuardScan:
    """The page built for `state`, the workspace, the endpoints and the sandbox, scanned."""
    brief = brief_for(state, scenario, datetime.now(UTC), ContextSettings(leak_check=False))
    if not isinstance(brief, BriefReady):  # with leak_check off only a brief comes back
        raise DeployerError(f"no page for {scenario.id}: {brief.reason}")
    _progress("probing the sandbox ...")
    sandbox = _sandbox_view(workspace, root, endpoints)
    _progress("scanning ...")
    started = time.monotonic()
    tells = Tells.for_run(
        scenario.id,
        brief.contract.alert_to_clear,
        state.expected_alert,
        runtime_override=scenario.env.runtime_override if scenario.env else None,
    )
    scan = guard_scan(
        tells, page=brief.page, workspace=workspace, endpoints=endpoints, sandbox=sandbox
    )
    read = ", ".join(f"{kind} {len(found)}" for kind, found in scan.surfaces.items())
    _progress(f"scanned in {time.monotonic() - started:.2f}s ({read} surfaces)")
    return scan


def _run_state(
    scenario: Scenario, time_scale: float, run_id: str, alert_route: str, stack: StackInfo
) -> RunState:
    """A triggered run of `scenario` on `stack`, as the context service would brief it."""
    expected = scenario.manifest.expected
    return RunState(
        run_id=run_id,
        scenario_id=scenario.id,
        agent="guard",
        time_scale=time_scale,
        alert_route=alert_route,
        expected_alert=expected.alert if expected else None,
        phase="triggered",
        alert_fired_at=datetime.now(UTC),
        stack=stack,
    )


def _sandbox_view(workspace: Path, root: Path, endpoints: dict[str, str]) -> SandboxView | None:
    """The sandbox as the runner makes it (host-sandboxed), seen from inside; None if
    bubblewrap cannot run here (then the agent would not be confined either)."""
    sandbox = HostSandbox(
        workspace,
        root,
        RunnerSettings(),
        kind="host-sandboxed",
        endpoints=tuple(endpoints.values()),
    )
    try:
        sandbox.create()
    except SandboxError as error:
        _progress(f"sandbox not probed: {error}")
        return None
    try:
        return asyncio.run(probe_sandbox(sandbox))
    finally:
        sandbox.destroy()


def _report(scan: GuardScan, *, as_json: bool) -> None:
    read = {kind: len(found) for kind, found in scan.surfaces.items()}
    if as_json:
        hits = [asdict(leak) for leak in scan.leaks]
        print(json.dumps({"clean": not scan.leaks, "surfaces": read, "hits": hits}, indent=2))
        return
    for leak in scan.leaks:
        print(f"HIT  {leak.where} line {leak.line}: {leak.what}: {leak.excerpt}")
    if "sandbox" not in read:
        print("note: the sandbox was not probed (bubblewrap unavailable): not scanned")
    summary = ", ".join(f"{kind} {count}" for kind, count in read.items())
    verdict = f"{len(scan.leaks)} hit(s)" if scan.leaks else "clean: no tells"
    print(f"{verdict} on {summary} surfaces")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
