"""`sreforge campaign FILE | resume ID | show ID`: many runs at once, resumable, with statistics."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from sreforge.campaign._errors import CampaignError
from sreforge.campaign._spec import CampaignSpec, load_spec
from sreforge.campaign._store import CampaignSettings, CampaignStore, new_campaign_id

__all__ = ["add_campaign_command", "campaign_command"]

_USAGE = """sreforge campaign FILE [--resume ID] [overrides]  run (or resume) a campaign
       sreforge campaign resume ID [overrides]           resume from its campaign.toml
       sreforge campaign show ID [--json]                print its statistics
"""
_EPILOG = """\
Output goes to campaigns/<id>/ ($SREFORGE_CAMPAIGNS_DIR, default ./campaigns, beside the
recorder's ./runs): campaign.toml, results.jsonl, summary.json, summary.csv.
exit codes: 0 every trial finished; 1 some trials ended without a record (resume runs
them again); 2 a bad file, id or flag; 130 interrupted (resume runs the rest).
See docs/campaigns.md.
"""
_SAME_ON_RESUME = ("time_scale", "topology")


def add_campaign_command(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `campaign` (see `_USAGE`)."""
    campaign = verbs.add_parser(
        "campaign",
        help="run agents x scenarios x trials at once; resume; show pass@k statistics",
        usage=_USAGE,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    campaign.add_argument("target", metavar="FILE|resume|show", help="campaign TOML, or a verb")
    campaign.add_argument("campaign_id", nargs="?", metavar="ID", help="with resume / show")
    campaign.add_argument("--resume", metavar="ID", help="continue campaign ID with FILE")
    campaign.add_argument("--json", action="store_true", help="show: the summary as JSON")
    campaign.add_argument("--trials", type=int, help="override the file's trials")
    campaign.add_argument("--time-scale", type=float, help="override the file's time_scale")
    campaign.add_argument("--concurrency", type=int, help="override the file's concurrency")
    campaign.add_argument("--topology", choices=("local", "compose"), help="override topology")
    campaign.add_argument("--agents", type=_names, help="override agents: a,b,...")
    campaign.add_argument("--scenarios", type=_names, help="override scenarios: a,b,...")
    campaign.set_defaults(handler=campaign_command)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    fields = ("trials", "time_scale", "concurrency", "topology", "agents", "scenarios")
    return {name: getattr(args, name) for name in fields}


def campaign_command(args: argparse.Namespace) -> int:
    """Dispatch `campaign FILE`, `campaign resume ID` and `campaign show ID`."""
    root = CampaignSettings().dir
    if args.target in ("show", "resume"):
        if args.campaign_id is None:
            raise CampaignError(f"campaign {args.target} needs a campaign ID")
        store = CampaignStore(root, args.campaign_id)
        if args.target == "show":
            return _show(store, as_json=args.json)
        stored = store.spec()
        merged = stored.model_dump() | _set(_overrides(args))
        try:
            spec = CampaignSpec.model_validate(merged)
        except ValueError as error:
            raise CampaignError(f"campaign {store.campaign_id}: {error}") from None
        return _run(store, _same_run_conditions(store, spec))
    if args.campaign_id is not None:
        raise CampaignError(f"unexpected {args.campaign_id!r}: did you mean --resume ID?")
    spec = load_spec(Path(args.target), _overrides(args))
    if args.resume is None:
        return _run(CampaignStore(root, new_campaign_id()), spec)
    store = CampaignStore(root, args.resume)
    return _run(store, _same_run_conditions(store, spec))


def _same_run_conditions(store: CampaignStore, spec: CampaignSpec) -> CampaignSpec:
    """`spec`, if it runs under the stored spec's time scale and topology (a resume may
    add trials, agents or scenarios, never mix conditions)."""
    stored = store.spec()
    for name in _SAME_ON_RESUME:
        if getattr(stored, name) != getattr(spec, name):
            raise CampaignError(
                f"{name}: campaign {store.campaign_id} ran at {getattr(stored, name)!r}, "
                f"this resume asks for {getattr(spec, name)!r}; a resume must not mix them"
            )
    return spec


def _set(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _run(store: CampaignStore, spec: CampaignSpec) -> int:
    from sreforge_bus import BusError

    from sreforge._logging import configure_logging
    from sreforge._settings import EngineSettings
    from sreforge.campaign._runner import run_campaign
    from sreforge.campaign._show import format_table

    settings = EngineSettings()
    configure_logging(settings.log_format, "WARNING")
    store.create(spec)
    try:
        end = asyncio.run(run_campaign(settings, store, spec, sys.stderr))
    except BusError as error:  # e.g. the running engine refused the operator's login
        raise CampaignError(f"campaign {store.campaign_id}: {error}") from None
    print(format_table(store.campaign_id, spec, store.results()), flush=True)
    if end.interrupted and end.pending:
        print(f"interrupted: resume with `sreforge campaign resume {store.campaign_id}`",
              file=sys.stderr)  # fmt: skip
        return 130
    return 1 if end.pending else 0


def _show(store: CampaignStore, *, as_json: bool) -> int:
    from sreforge.campaign._show import format_table, summary

    spec, results = store.spec(), store.results()
    if as_json:
        print(json.dumps(summary(store.campaign_id, spec, results), indent=2))
    else:
        print(format_table(store.campaign_id, spec, results))
    return 0
