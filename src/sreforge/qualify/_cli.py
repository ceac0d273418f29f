"""`sreforge qualify <scenario>`: the scenario's qualification, run as one campaign.

The arms (`_arms`) at the qualification's time scale become one campaign (the cheats as
its `once` agents), run by the campaign loop as `sreforge campaign` runs it; the
time-scale-1 arms a second one; then `sreforge guard`; `_decide` judges the results and
`verify/headroom.md` gets the verdict and its evidence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sreforge_contracts import ContractError, load_scenario

from sreforge.campaign._errors import CampaignError
from sreforge.campaign._spec import CampaignSpec
from sreforge.campaign._store import CampaignSettings, CampaignStore, new_campaign_id
from sreforge.qualify._arms import FULL_SCALE, Arm, arms_for, load_cheats
from sreforge.qualify._decide import GuardOutcome, decide
from sreforge.qualify._errors import QualifyError
from sreforge.qualify._render import render_headroom

__all__ = ["add_qualify_command", "qualify_command", "run_guard"]

_EPILOG = """\
Writes verify/headroom.md in the scenario folder; the campaign is under campaigns/<id>/.
exit codes: 0 QUALIFIED; 1 DISQUALIFIED (or interrupted: 130); 2 a bad scenario or flag.
See docs/qualify.md.
"""


def add_qualify_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `qualify`."""
    qualify = verbs.add_parser(
        "qualify", help="prove a scenario tells a fix from a non-fix; writes verify/headroom.md",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    qualify.add_argument("scenario", help="scenario id (e.g. latency-cache-stampede) or folder")
    qualify.add_argument("--trials", type=int, default=10, help="N per arm (default 10)")
    qualify.add_argument("--time-scale", type=float, default=0.1, help="0 < S <= 1 (default 0.1)")
    qualify.add_argument("--concurrency", type=int, default=2, help="runs at once (default 2)")
    qualify.add_argument(
        "--baseline", action="append", default=[], metavar="AGENT",
        help="a baseline agent for headroom (repeatable); none: headroom not measured",
    )  # fmt: skip
    qualify.set_defaults(handler=qualify_command)


def run_guard(scenario: Path, time_scale: float) -> GuardOutcome:
    """`sreforge guard` on the scenario, in a child process (it brings a stack up)."""
    argv = [sys.executable, "-m", "sreforge", "guard", str(scenario),
            "--time-scale", f"{time_scale:g}", "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return GuardOutcome(True, "clean")
    if done.returncode == 1:
        try:
            hits = len(json.loads(done.stdout).get("hits", []))
        except (json.JSONDecodeError, AttributeError):
            hits = 0
        return GuardOutcome(False, f"{hits or 'some'} hit(s) (run `sreforge guard` to see them)")
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return GuardOutcome(None, f"could not run (exit {done.returncode}): {tail}")


def qualify_command(args: argparse.Namespace) -> int:
    """Build the arms, run them as a campaign, guard, decide, write `verify/headroom.md`."""
    from sreforge._stack_cli import resolve_scenario

    if args.trials < 1:
        raise QualifyError(f"--trials: {args.trials} must be at least 1")
    if not 0 < args.time_scale <= 1:
        raise QualifyError(f"--time-scale: {args.time_scale} must be in (0, 1]")
    if args.concurrency < 1:
        raise QualifyError(f"--concurrency: {args.concurrency} must be at least 1")
    try:
        scenario = load_scenario(resolve_scenario(args.scenario))
    except (ValueError, ContractError) as error:
        raise QualifyError(f"scenario: {error}") from None
    cheats = load_cheats(scenario.path.parent.parent)
    arms = arms_for(scenario, args.trials, cheats, tuple(args.baseline), args.time_scale)
    scaled = [arm for arm in arms if not arm.full_scale]
    if cheats is not None:  # the engine this command starts finds them (docs/qualify.md)
        os.environ.setdefault("SREFORGE_RUNNER_SCRIPTS_DIR", str(cheats.folder))
    try:
        spec = CampaignSpec(
            scenarios=(scenario.id,), agents=tuple(arm.agent for arm in scaled),
            trials=args.trials, time_scale=args.time_scale, concurrency=args.concurrency,
            once=tuple(arm.agent for arm in scaled if arm.trials == 1 and arm.kind == "cheat"),
        )  # fmt: skip
    except ValueError as error:
        raise QualifyError(f"qualify {scenario.id}: {error}") from None
    store = CampaignStore(CampaignSettings().dir, new_campaign_id())
    print(f"qualify {scenario.id}: {len(scaled)} arms as campaign {store.campaign_id}",
          file=sys.stderr, flush=True)  # fmt: skip
    if _campaign(store, spec):
        print(f"qualify: interrupted; nothing written (campaign {store.campaign_id})",
              file=sys.stderr)  # fmt: skip
        return 130
    full = _full_scale(scenario.id, [arm for arm in arms if arm.full_scale], args.concurrency)
    if full is not None and _campaign(full[0], full[1]):
        print(f"qualify: interrupted; nothing written (campaign {full[0].campaign_id})",
              file=sys.stderr)  # fmt: skip
        return 130
    guard = run_guard(scenario.path, args.time_scale)
    full_results = full[0].results() if full is not None else []
    decision = decide(scenario.id, arms, store.results(), guard, full_results)
    text = render_headroom(
        scenario.id, decision, store.campaign_id, datetime.now(UTC), args.time_scale,
        full[0].campaign_id if full is not None else None,
    )  # fmt: skip
    target = scenario.verify_dir / "headroom.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(text)
    print(f"qualify: wrote {target}", file=sys.stderr)
    return 0 if decision.qualified else 1


def _full_scale(
    scenario: str, arms: list[Arm], concurrency: int
) -> tuple[CampaignStore, CampaignSpec] | None:
    """The time-scale-1 arms' campaign (one trial each, side by side), if there are any."""
    if not arms:
        return None
    spec = CampaignSpec(
        scenarios=(scenario,), agents=tuple(arm.agent for arm in arms), trials=1,
        time_scale=FULL_SCALE, concurrency=min(concurrency, len(arms)),
    )  # fmt: skip
    store = CampaignStore(CampaignSettings().dir, new_campaign_id())
    print(f"qualify {scenario}: {len(arms)} arms at time scale 1 as campaign "
          f"{store.campaign_id}", file=sys.stderr, flush=True)  # fmt: skip
    return store, spec


def _campaign(store: CampaignStore, spec: CampaignSpec) -> bool:
    """Run the campaign through the campaign loop; whether a Ctrl-C stopped it."""
    from sreforge_bus import BusError

    from sreforge._logging import configure_logging
    from sreforge._settings import EngineSettings
    from sreforge.campaign._runner import run_campaign

    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    store.create(spec)
    try:
        end = asyncio.run(run_campaign(settings, store, spec, sys.stderr))
    except BusError as error:
        raise CampaignError(f"campaign {store.campaign_id}: {error}") from None
    return end.interrupted and end.pending > 0
